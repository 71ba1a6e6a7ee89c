"""One walk of a call skeleton (``ToolCallStructure.call_parts`` / ``arg_parts``), one visitor
per output.

A skeleton is a sequence of :class:`~chat_autoparser.analyzer.structures.Part`: literal text and slots (the
tool's name, an id, an index, the arguments, an argument's key and value, a literal chosen by the
value's JSON type). :func:`walk` dispatches each part on its :class:`PartKind` to a method of a
:class:`SkeletonVisitor`; what a part becomes (text, a regex, a grammar item, a label) is the
visitor's business, so a new output is one visitor and the dispatch lives here once.

Example::

    >>> from chat_autoparser.analyzer.structures import Part
    >>> class Label(SkeletonVisitor[str]):
    ...     def lit(self, part, at): return part.text
    ...     def slot(self, part, at): return f"<{part.kind}>"
    >>> "".join(walk((Part("lit", "[call "), Part("name"), Part("lit", "] "), Part("args")), Label()))
    '[call <name>] <args>'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

from .structures import Part, PartKind

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class At:
    """Where a part stands in its skeleton (for visitors that look at their neighbours)."""

    index: int
    parts: tuple[Part, ...]

    @property
    def prev(self) -> Part | None:
        return self.parts[self.index - 1] if self.index > 0 else None

    @property
    def next(self) -> Part | None:
        return self.parts[self.index + 1] if self.index + 1 < len(self.parts) else None


class SkeletonVisitor(Generic[T]):
    """One method per part kind; each defaults to :meth:`slot` (slots) or :meth:`lit`."""

    def lit(self, part: Part, at: At) -> T:
        raise NotImplementedError(f"{type(self).__name__} does not handle literals")

    def slot(self, part: Part, at: At) -> T:
        raise NotImplementedError(f"{type(self).__name__} does not handle {part.kind!r} slots")

    def name(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def id(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def index(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def args(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def key(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def value(self, part: Part, at: At) -> T:
        return self.slot(part, at)

    def typed(self, part: Part, at: At) -> T:
        return self.slot(part, at)


_METHOD = {k: k.value for k in PartKind}


def walk(parts: Sequence[Part], visitor: SkeletonVisitor[T]) -> list[T]:
    """``visitor``'s value for each part, in order."""
    seq = tuple(parts)
    out: list[T] = []
    for i, p in enumerate(seq):
        out.append(getattr(visitor, _METHOD[p.kind])(p, At(i, seq)))
    return out


def split_at(parts: Sequence[Part], kind: PartKind) -> tuple[tuple[Part, ...], Part | None, tuple[Part, ...]]:
    """(the parts before the first ``kind`` slot, that slot, the parts after it); the slot is None
    (and all parts are "before") when there is none.

    Example::

        >>> before, slot, after = split_at((Part("lit", "<a>"), Part("args"), Part("lit", "</a>")), PartKind.ARGS)
        >>> [p.text for p in before], slot.kind, [p.text for p in after]
        (['<a>'], 'args', ['</a>'])
    """
    seq = tuple(parts)
    for i, p in enumerate(seq):
        if p.kind == kind:
            return seq[:i], p, seq[i + 1:]
    return seq, None, ()


def kinds(parts: Sequence[Part]) -> list[PartKind]:
    """The kinds of ``parts``, in order."""
    return [p.kind for p in parts]
