"""Combinators: sequence, guarded choice, optional parts, lookahead, hooks, captures,
:class:`OneOf` (one of several literals), lazy and tentative parsers (:class:`Attempt`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Sequence

from .runtime import (
    FAIL,
    NEED,
    SLOW,
    Driven,
    Event,
    Input,
    Parser,
    Run,
    deviate,
    mark,
    rollback,
    skip_ws,
    wake_for,
)
from .text import Empty, Marker


@dataclass(eq=False)
class Seq(Parser):
    items: Sequence[Parser]

    def __init__(self, *items: Parser) -> None:
        self.items = [p for p in items if not isinstance(p, Empty)]

    def run(self, inp: Input, pos: int) -> Run:
        for p in self.items:
            r = p.fast(inp, pos)
            pos = (yield from p.run(inp, pos)) if r == SLOW else r
            if pos == FAIL:
                return FAIL
        return pos

    def fast(self, inp: Input, pos: int) -> int:
        """With the whole input at hand, the items in a row; anything but success is left to
        ``run()`` (failures are reported there)."""
        if not inp.eof:
            return SLOW
        m = mark(inp)
        for p in self.items:
            pos = p.fast(inp, pos)
            if pos < 0:
                return rollback(inp, m)
        return pos

    def first(self) -> tuple[str, ...] | None:
        out: list[str] = []
        for p in self.items:
            f = p.first()
            if f is None:
                return None
            out.extend(x for x in f if x)
            if not p.nullable():
                return tuple(out)
        return tuple(out) + ("",)

    def nullable(self) -> bool:
        return all(p.nullable() for p in self.items)


def _decision_pattern(cont: tuple[str, ...], closers: tuple[str, ...]) -> re.Pattern | None:
    """Continuation guards and closers as one pattern, longest first, a closer first on a tie:
    the group a match ends in (``c…`` or ``s…``) says which decides (with the whole input)."""
    found = sorted({(g, "s") for g in closers if g} | {(g, "c") for g in cont if g},
                   key=lambda gk: (-len(gk[0]), gk[1] == "c"))
    return re.compile("|".join(f"(?P<{k}{n}>{re.escape(g)})" for n, (g, k) in enumerate(found))) if found else None


def guard_state(inp: Input, pos: int, guards: Iterable[str]) -> tuple[str | None, bool]:
    """(the longest guard the input starts with, whether a longer guard may still match)."""
    hit, pending = None, False
    text, at = inp.text, pos - inp.base
    avail = inp.end - pos
    for g in guards:
        n = len(g)
        if n <= avail:
            if n and text.startswith(g, at) and (hit is None or n > len(hit)):
                hit = g
        elif not pending and not inp.eof and g.startswith(text[at:]):
            pending = True
    return hit, pending


@dataclass(eq=False)
class Choice(Parser):
    """Guarded ordered choice: each alternative is taken when the input starts with one of its
    literals; ``default`` (if any) when none does. Never backtracks."""

    alternatives: Sequence[tuple[tuple[str, ...], Parser]]
    default: Parser | None = None

    @cached_property
    def _guards(self) -> tuple[re.Pattern[str] | None, dict[str, Parser], int]:
        """(a pattern of every guard, longest first; the alternative each guard picks: the first
        that has it; the longest guard's length)."""
        picks: dict[str, Parser] = {}
        for guards, p in self.alternatives:
            for g in guards:
                if g:
                    picks.setdefault(g, p)
        rx = re.compile("|".join(map(re.escape, sorted(picks, key=len, reverse=True)))) if picks else None
        return rx, picks, max(map(len, picks), default=0)

    def _pick(self, inp: Input, pos: int) -> tuple[Parser | None, bool]:
        """(the alternative whose guard is the longest the input starts with, else the default;
        whether a longer guard may still match)."""
        rx, picks, longest = self._guards
        if inp.eof or inp.end - pos >= longest:  # (no guard can still be pending)
            m = rx.match(inp.text, pos - inp.base) if rx is not None else None
            return (picks[m.group()] if m is not None else self.default), False
        best: tuple[int, Parser] | None = None
        pending = False
        for guards, p in self.alternatives:
            hit, more = guard_state(inp, pos, guards)
            pending = pending or more
            if hit is not None and (best is None or len(hit) > best[0]):
                best = (len(hit), p)
        return (best[1] if best is not None else self.default), pending

    def run(self, inp: Input, pos: int) -> Run:
        while True:
            chosen, pending = self._pick(inp, pos)
            if pending and not inp.eof:
                inp.wake = wake_for(inp, pos, (g for gs, _ in self.alternatives for g in gs))
                yield NEED  # a longer guard may still match
                continue
            if chosen is not None:
                r = chosen.fast(inp, pos)
                return (yield from chosen.run(inp, pos)) if r == SLOW else r
            return inp.fail(pos, "expected one of " + ", ".join(repr(g) for gs, _ in self.alternatives for g in gs))

    def fast(self, inp: Input, pos: int) -> int:
        if not inp.eof:
            return SLOW
        chosen = self._pick(inp, pos)[0]
        return chosen.fast(inp, pos) if chosen is not None else SLOW

    def first(self) -> tuple[str, ...] | None:
        out = tuple(g for gs, _ in self.alternatives for g in gs)
        if self.default is not None:
            d = self.default.first()
            return None if d is None else out + d
        return out

    def nullable(self) -> bool:
        return self.default is not None and self.default.nullable()


class OptMarker(Driven):
    """A marker that may be missing, after optional whitespace (taken only with the marker);
    after it, any whitespace (``loose_after``) or the template's own. ``missing_at_end``: when
    the output ends where the marker should be, an error event says so (it was cut off)."""

    def __init__(self, marker: Marker, loose_after: bool = True, missing_at_end: bool = False) -> None:
        self.marker = marker.loose(after=loose_after)
        self.missing_at_end = missing_at_end

    def run(self, inp: Input, pos: int) -> Run:
        q = yield from skip_ws(inp, pos)
        core = self.marker.core
        while inp.end - q < len(core) and not inp.eof and core.startswith(inp.get(q, inp.end)):
            yield NEED
        if not inp.startswith(core, q):
            if self.missing_at_end and inp.eof and (q >= inp.end or core.startswith(inp.get(q, inp.end))):
                inp.events.append(("error", q, f"output ends before {core!r}"))
            return pos
        return (yield from self.marker.run(inp, q))

    def first(self) -> tuple[str, ...]:
        return (self.marker.core, "")

    def nullable(self) -> bool:
        return True


class Ahead(Driven):
    """Looks ahead without consuming: the end of input, or one of ``literals``, must follow."""

    def __init__(self, literals: Sequence[str]) -> None:
        self.literals = tuple(x for x in literals if x)

    def run(self, inp: Input, pos: int) -> Run:
        while True:
            hit, pending = guard_state(inp, pos, self.literals)
            if inp.eof or not pending and (hit is not None or pos < inp.end):
                break
            yield NEED
        return pos if pos >= inp.end and inp.eof or hit is not None else inp.fail(pos, "more text follows")

    def first(self) -> tuple[str, ...]:
        return ("",)

    def nullable(self) -> bool:
        return True


def guards_of(p: Parser) -> tuple[str, ...]:
    f = p.first()
    if f is None or not [x for x in f if x]:
        raise ValueError(f"{p!r} has no literal to decide on")
    return tuple(x for x in f if x)


class Hooked(Parser):
    """``p``, with what it read looked at where it ends (``_ended``: the end to report, FAIL
    included)."""

    def __init__(self, p: Parser) -> None:
        self.p = p

    def _ended(self, inp: Input, pos: int, end: int) -> int:  # pragma: no cover - overridden
        return end

    def run(self, inp: Input, pos: int) -> Run:
        r = self.p.fast(inp, pos)
        end = (yield from self.p.run(inp, pos)) if r == SLOW else r
        return self._ended(inp, pos, end)

    def fast(self, inp: Input, pos: int) -> int:
        r = self.p.fast(inp, pos)
        return r if r == SLOW else self._ended(inp, pos, r)

    def first(self) -> tuple[str, ...] | None:
        return self.p.first()

    def nullable(self) -> bool:
        return self.p.nullable()


class Noted(Hooked):
    """``p``, noting a form the template does not write (a deviation event, see ``strict``):
    ``p`` read something (``missing`` off: an extra the template never writes) or read nothing
    (``missing`` on: something the template writes was left out)."""

    def __init__(self, p: Parser, what: str, missing: bool = False) -> None:
        super().__init__(p)
        self.what = what
        self.missing = missing

    def _ended(self, inp: Input, pos: int, end: int) -> int:
        if end >= 0 and (end == pos) == self.missing:
            deviate(inp, pos, self.what)
        return end


class Valid(Hooked):
    """``p``, failing where it started when the text it read is not ``ok`` (a slot of a known
    shape, such as an index, never takes other text)."""

    def __init__(self, p: Parser, ok: Callable[[str], Any], what: str) -> None:
        super().__init__(p)
        self.ok = ok
        self.what = what

    def _ended(self, inp: Input, pos: int, end: int) -> int:
        if end >= 0 and not self.ok(inp.get(pos, end)):
            return inp.fail(pos, f"expected {self.what}")
        return end


def Opt(p: Parser, guards: tuple[str, ...] | None = None) -> Parser:
    """``p`` when the input starts with one of its first literals, else nothing."""
    return Choice([(guards or guards_of(p), p)], Empty())


@dataclass(eq=False)
class OneOf(Parser):
    """One of ``options`` (longest match), streamed as one ``value`` event of ``tag``."""

    options: Sequence[str]
    tag: str | None = None

    def run(self, inp: Input, pos: int) -> Run:
        while True:
            hit, pending = guard_state(inp, pos, self.options)
            if pending and not inp.eof:
                inp.wake = wake_for(inp, pos, self.options)
                yield NEED
                continue
            break
        if hit is None:
            return inp.fail(pos, "expected one of " + ", ".join(map(repr, self.options)))
        inp.emit(inp.tag(self.tag), hit, pos + len(hit))
        return pos + len(hit)

    def fast(self, inp: Input, pos: int) -> int:
        hit, pending = guard_state(inp, pos, self.options)
        if pending and not inp.eof:
            return SLOW
        if hit is None:
            return inp.fail(pos, "expected one of " + ", ".join(map(repr, self.options)))
        inp.emit(inp.tag(self.tag), hit, pos + len(hit))
        return pos + len(hit)

    def first(self) -> tuple[str, ...]:
        return tuple(self.options)


@dataclass(eq=False)
class Capture(Parser):
    """Tag the region ``p`` parses: an ``open`` event before, ``close`` after (also on failure,
    with the failure reported by the runtime). With ``where``, the events also say where the
    region is: ``("open", tag, start)`` and ``("close", tag, end, ok)``, ``end`` being where it
    failed when not ``ok`` (a tool call that never gets a name is kept verbatim from them)."""

    tag: str
    p: Parser
    where: bool = False

    def _close(self, inp: Input, pos: int, end: int) -> tuple:
        if not self.where:
            return ("close", self.tag)
        if end >= 0:
            inp.region_end = end
        return ("close", self.tag, end if end >= 0 else max(inp.error_pos, pos), end >= 0)

    def fast(self, inp: Input, pos: int) -> int:
        mark = len(inp.events)
        inp.tags.append(self.tag)
        try:
            end = self.p.fast(inp, pos)
        finally:
            inp.tags.pop()
        if end == SLOW:
            return SLOW
        inp.events.insert(mark, ("open", self.tag, pos) if self.where else ("open", self.tag))
        inp.events.append(self._close(inp, pos, end))
        return end

    def run(self, inp: Input, pos: int) -> Run:
        inp.events.append(("open", self.tag, pos) if self.where else ("open", self.tag))
        inp.tags.append(self.tag)
        try:
            r = self.p.fast(inp, pos)
            end = (yield from self.p.run(inp, pos)) if r == SLOW else r
        finally:
            inp.tags.pop()
        inp.events.append(self._close(inp, pos, end))
        return end

    def first(self) -> tuple[str, ...] | None:
        return self.p.first()

    def nullable(self) -> bool:
        return self.p.nullable()


@dataclass(eq=False)
class Lazy(Parser):
    """A parser built on first use (for recursive grammars)."""

    make: Callable[[], Parser]
    _p: Parser | None = field(default=None, init=False)

    @property
    def p(self) -> Parser:
        if self._p is None:
            self._p = self.make()
        return self._p

    def run(self, inp: Input, pos: int) -> Run:
        return (yield from self.p.run(inp, pos))

    def fast(self, inp: Input, pos: int) -> int:
        return self.p.fast(inp, pos)

    def first(self) -> tuple[str, ...] | None:
        return self.p.first()

    def nullable(self) -> bool:
        return self.p.nullable()


class Attempt(Parser):
    """``p`` tried without commitment: what it emits is held back until it succeeds and
    ``accept(events)`` agrees; otherwise the input is left as it was and the attempt matches
    nothing (it is nullable: the caller goes on at the same place, with no error).

    The text from the start is kept meanwhile, and streaming reports nothing of it until the
    attempt is decided.
    """

    keep = True  # a successful attempt keeps what it read (see :class:`Check`)

    def __init__(self, p: Parser, accept: Callable[[list[Event]], bool] | None = None) -> None:
        self.p = p
        self.accept = accept

    def _decided(self, inp: Input, pos: int, end: int, at: int, state: tuple) -> int:
        ok = end != FAIL and (self.accept is None or self.accept(inp.events[at:]))
        if ok and self.keep:
            return end
        del inp.events[at:]
        self._restore(inp, state)
        return pos if ok or self.keep else FAIL

    def _state(self, inp: Input) -> tuple:
        return (inp.chunks, inp.chunk_pos, inp.region_end, inp.error_pos, inp.error, inp.keep_from,
                inp.recovered, list(inp.soft_pins))

    def _restore(self, inp: Input, state: tuple) -> None:
        (inp.chunks, inp.chunk_pos, inp.region_end, inp.error_pos, inp.error, inp.keep_from,
         inp.recovered, inp.soft_pins) = state
        inp.fast = None

    def fast(self, inp: Input, pos: int) -> int:
        state, at = self._state(inp), len(inp.events)
        end = self.p.fast(inp, pos)
        if end == SLOW:
            return SLOW
        return self._decided(inp, pos, end, at, state)

    def run(self, inp: Input, pos: int) -> Run:
        state = self._state(inp)
        depth = len(inp.holds)
        inp.holds.append(len(inp.events))
        inp.pin(pos)
        try:
            r = self.p.fast(inp, pos)
            end = (yield from self.p.run(inp, pos)) if r == SLOW else r
        finally:
            inp.unpin(pos)
            at = inp.holds.pop(depth)
        return self._decided(inp, pos, end, at, state)

    def first(self) -> tuple[str, ...] | None:
        f = self.p.first()
        return None if f is None else f + ("",)

    def nullable(self) -> bool:
        return True


class Check(Attempt):
    """Looks ahead with ``p``: succeeds at the same place, emitting and consuming nothing, when
    ``p`` would succeed here (and ``accept`` agrees); fails, leaving no trace, otherwise."""

    keep = False

    def nullable(self) -> bool:
        return False
