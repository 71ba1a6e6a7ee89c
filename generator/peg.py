"""A small resumable PEG runtime for parsing model output, whole or as it streams.

Parsers are coroutines over one shared input buffer: when a parser needs text that has not
arrived yet it yields, and resumes when more is fed. The same grammar therefore parses a
complete output (feed everything, then finish) and a stream (feed chunks), and a stream never
re-parses what came before.

To keep streaming cheap and events final, choices are *guarded*: an alternative is chosen by
the literal its input starts with (waiting while a literal is still partially present), and
the choice is never undone. Grammars for model output are like that: markers decide.

Building blocks:

* :class:`Lit` / :class:`Marker`: a literal; a marker also takes the whitespace the template
  writes around it, when present.
* :class:`Seq`, :class:`Choice` (guarded), :func:`Opt`, :class:`Repeat` (guarded by the
  separator / the item's first literal).
* :class:`Until`: text up to the first of some markers (or the end), streamed as it arrives,
  holding back only what could still be the start of a marker.
* :class:`JsonValue`: one JSON value, scanned incrementally; its raw bytes are streamed.
* :class:`Capture`: tags a region: ``open``/``chunk``/``close`` events.
* :class:`OneOf`: one of several literals (e.g. the tool names), longest match.

Example::

    >>> g = Seq(Capture("a", Until([Marker("</a>")])), Marker("</a>"), Capture("b", Until([])))
    >>> run_all(g, "x</a>y")[1]
    [('open', 'a'), ('chunk', 'a', 'x'), ('close', 'a'), ('open', 'b'), ('chunk', 'b', 'y'), ('close', 'b')]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Callable, Generator, Iterable, Sequence

import regex

from .marker_search import SHORT, alternation_search, marker_search

FAIL = -1
SLOW = -2    # ``fast()`` cannot answer without waiting for input: use ``run()``
NEED = None  # what a parser yields when it needs more input

Event = tuple  # ("open", tag) | ("chunk", tag, text) | ("close", tag) | ("value", tag, obj)
Run = Generator[None, None, int]


class Input:
    """The text fed so far. Positions are absolute; the consumed head is dropped from memory."""

    __slots__ = ("text", "base", "end", "eof", "events", "fast", "error", "error_pos", "keep_from", "tags",
                 "chunks", "chunk_pos", "region_end", "recovered", "pins", "soft_pins", "drained", "wake", "holds",
                 "whole")

    def __init__(self) -> None:
        self.text = ""
        self.end = 0  # absolute position after the last character fed
        self.base = 0
        self.eof = False
        self.events: list[Event] = []
        self.fast: _Fast | None = None
        self.error = ""
        self.error_pos = -1
        self.keep_from = 0  # nothing before this absolute position is needed again
        self.tags: list[str] = []  # open captures, innermost last
        self.chunks = 0      # chunk events emitted so far
        self.chunk_pos = 0   # where the last emitted chunk ended
        self.region_end = 0  # where the last whole region of a ``where`` capture (a call) ended
        self.recovered = False  # a Recover fell back to raw text (the enclosing structure is broken)
        self.pins: list[int] = []  # positions a parser will read back from (never trimmed)
        self.soft_pins: list[int] = []  # the same, until the next chunk is emitted
        self.drained = 0  # events handed out (and removed from ``events``) so far
        self.wake = 0  # the waiting parser cannot decide before the input reaches this end
        self.holds: list[int] = []  # events from these indices on are held back (tentative: see Attempt)
        self.whole = False  # one-shot: whole structures may be read at once (see ``set_text``)

    def emit(self, tag: str | None, text: str, end: int) -> None:
        """A ``chunk`` event of ``tag`` (nothing for an empty tag or text)."""
        if tag and text:
            self.events.append(("chunk", tag, text))
            self.chunks += 1
            self.chunk_pos = end
            if self.soft_pins:
                self.soft_pins.clear()

    def tag(self, own: str | None) -> str | None:
        """A text parser's tag: its own, else the innermost open capture's."""
        return own if own is not None else (self.tags[-1] if self.tags else None)

    def get(self, a: int, b: int) -> str:
        return self.text[a - self.base:b - self.base]

    def startswith(self, s: str, pos: int) -> bool:
        return self.text.startswith(s, pos - self.base)

    def find(self, s: str, pos: int) -> int:
        i = self.text.find(s, pos - self.base)
        return i + self.base if i >= 0 else -1

    @property
    def n_events(self) -> int:
        """Events emitted so far, handed out or not (a mark to compare against later)."""
        return self.drained + len(self.events)

    def drain(self) -> list[Event]:
        """The events to hand out: all of them, but those an :class:`Attempt` still holds."""
        if self.holds:
            k = self.holds[0]
            out, self.events = self.events[:k], self.events[k:]
            self.holds = [h - k for h in self.holds]
        else:
            out, self.events = self.events, []
        self.drained += len(out)
        return out

    def pin(self, pos: int) -> int:
        """Keep the text from ``pos`` on until ``unpin(pos)``: a parser will read it back."""
        self.pins.append(pos)
        return pos

    def unpin(self, pos: int) -> None:
        self.pins.remove(pos)

    def soft_pin(self, pos: int) -> None:
        """Keep the text from ``pos`` on until a chunk is emitted (or ``soft_unpin(pos)``)."""
        self.soft_pins.append(pos)

    def soft_unpin(self, pos: int) -> None:
        if pos in self.soft_pins:
            self.soft_pins.remove(pos)

    def feed(self, chunk: str) -> None:
        if len(self.text) > 2048:  # amortized O(1): copy only when half is dead
            keep = min((self.keep_from, *self.pins, *self.soft_pins))
            drop = keep - self.base
            if drop * 2 > len(self.text):
                self.text = self.text[drop:]
                self.base += drop
        self.text += chunk
        self.end += len(chunk)

    def set_text(self, text: str, whole: bool = True) -> None:
        """The whole input at once (one-shot parsing). ``whole``: parsers may read a whole
        structure at once into one condensed event (a call: see ``Assembler.handle``)."""
        self.text, self.base, self.end, self.eof, self.whole = text, 0, len(text), True, whole

    def fail(self, pos: int, message: str) -> int:
        if pos > self.error_pos:
            self.error_pos, self.error = pos, message
        return FAIL


@lru_cache(maxsize=64)
def _held_at_end(ws: str, lines: bool) -> tuple[str, str]:
    """(what, ending a chunk, may be held back; what a chunk that may hold some back can end in):
    with ``lines``, spaces only after a line break."""
    if not lines:
        return ws, ws
    hold = "".join(c for c in ws if c in "\r\n")
    return hold, hold + "".join(c for c in " \t" if c in ws)


class _Fast:
    """A waiting parser's shortcut for the driver: a chunk that contains none of ``stop``
    characters is plain text of the region, emitted under ``tag`` without resuming the parser
    stack. Subclasses that scan other chunks themselves set ``scan`` (see :class:`_JsonScan`);
    their ``stop`` may be None (no chunk is plain)."""

    __slots__ = ("stop", "tag", "emitted", "ws", "lines", "hold", "ends")
    scan = False  # ``step`` reads the chunks that are not plain

    def __init__(self, stop: frozenset[str] | None, tag: str | None, emitted: int, ws: str = "",
                 lines: bool = False) -> None:
        self.stop = stop
        self.tag = tag
        # the input from ``emitted`` to its end is whitespace in ``ws``: held back, since it
        # belongs to a stop marker if one comes next (text that goes on emits it)
        self.emitted = emitted
        self.ws = ws
        # spaces and tabs belong to a stop only after a line break (its indentation): after
        # other text they need not be held
        self.lines = lines
        self.hold, self.ends = _held_at_end(ws, lines)

    def plain(self, chunk: str) -> bool:
        """A chunk that is plain text of the region (nothing in it can start a stop)."""
        return self.stop is not None and self.stop.isdisjoint(chunk)

    def held(self, inp: "Input") -> str:
        """The whitespace held back at the end of the input."""
        return inp.get(self.emitted, inp.end)

    def step(self, inp: "Input") -> int | None:  # pragma: no cover - scanners only
        raise NotImplementedError


class Parser:
    """Base: ``run(inp, pos)`` is a coroutine returning the end position or ``FAIL``."""

    def run(self, inp: Input, pos: int) -> Run:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def fast(self, inp: Input, pos: int) -> int:
        """The result without a coroutine when the input at hand decides it (no side effects
        when it returns ``SLOW``)."""
        return SLOW

    def first(self) -> tuple[str, ...] | None:
        """Literals the parser can start with (None: unknown, or may start with anything)."""
        return None

    def nullable(self) -> bool:
        return False

    def fast_more(self, inp: Input, pos: int, most: int) -> tuple[int, int]:
        """More items of a repetition in a row from ``pos``, at most ``most``, where this
        parser reads such a run at once (each item starts with :meth:`lead`, after whitespace
        only): where the last ends and how many were read (``(pos, 0)``: none)."""
        return pos, 0

    def lead(self) -> str | None:
        """The literal every item :meth:`fast_more` reads starts with (None: it reads none)."""
        return None


def _wait_for(inp: Input, pos: int, n: int) -> Generator[None, None, None]:
    while inp.end - pos < n and not inp.eof:
        inp.wake = pos + n
        yield NEED


_WS_RUN = re.compile(r"[ \t\r\n]*")
NO_LIMIT = 1 << 62  # a count no run reaches (no limit)


def past_ws(inp: Input, pos: int) -> int:
    """Past a run of whitespace in a complete input (:func:`skip_ws` without a generator, for
    the one-shot path: ``past_ws(inp, p) if inp.eof else (yield from skip_ws(inp, p))``)."""
    return _WS_RUN.match(inp.text, pos - inp.base).end() + inp.base


def skip_ws(inp: Input, pos: int) -> Generator[None, None, int]:
    """Past a run of whitespace, once what follows it (or the end of input) is at hand."""
    while True:
        i = _WS_RUN.match(inp.text, pos - inp.base).end() + inp.base
        if i < inp.end or inp.eof:
            return i
        pos = i
        yield NEED


def wake_for(inp: Input, at: int, guards: Iterable[str]) -> int:
    """The least input end at which one of ``guards`` still pending at ``at`` could match (a
    waiting parser is not resumed before: it would only wait again)."""
    avail = inp.get(at, inp.end)
    return min((at + len(g) for g in guards if len(g) > len(avail) and g.startswith(avail)), default=0)


def deviate(inp: Input, pos: int, what: str) -> None:
    """A form the template does not write was read at ``pos`` (an event; see ``strict``)."""
    inp.events.append(("deviation", pos, what))


def mark(inp: Input) -> tuple:
    """What a composite ``fast()`` restores when it gives up (its parts emitted events)."""
    return len(inp.events), inp.chunks, inp.chunk_pos, inp.region_end, inp.error_pos, inp.error


def rollback(inp: Input, m: tuple) -> int:
    del inp.events[m[0]:]
    inp.chunks, inp.chunk_pos, inp.region_end, inp.error_pos, inp.error = m[1:]
    return SLOW


class Empty(Parser):
    def run(self, inp: Input, pos: int) -> Run:
        return pos
        yield  # pragma: no cover

    def fast(self, inp: Input, pos: int) -> int:
        return pos

    def nullable(self) -> bool:
        return True

    def first(self) -> tuple[str, ...] | None:
        return ("",)


class Text(Parser):
    """A literal that is text of the region it stands in (emitted as a chunk), not structure."""

    def __init__(self, text: str) -> None:
        self.lit = Lit(text)

    def run(self, inp: Input, pos: int) -> Run:
        r = self.lit.fast(inp, pos)
        end = (yield from self.lit.run(inp, pos)) if r == SLOW else r
        if end != FAIL:
            inp.emit(inp.tag(None), self.lit.text, end)
        return end

    def fast(self, inp: Input, pos: int) -> int:
        end = self.lit.fast(inp, pos)
        if end >= 0:
            inp.emit(inp.tag(None), self.lit.text, end)
        return end

    def first(self) -> tuple[str, ...]:
        return (self.lit.text,)


class Ws(Parser):
    """Any run of whitespace, possibly none (between pieces of structure)."""

    def run(self, inp: Input, pos: int) -> Run:
        return (yield from skip_ws(inp, pos))

    def fast(self, inp: Input, pos: int) -> int:
        i = _WS_RUN.match(inp.text, pos - inp.base).end()
        return i + inp.base if i < len(inp.text) or inp.eof else SLOW

    def first(self) -> tuple[str, ...]:
        return ("",)

    def nullable(self) -> bool:
        return True


@dataclass(eq=False)
class Lit(Parser):
    text: str

    def run(self, inp: Input, pos: int) -> Run:
        yield from _wait_for(inp, pos, len(self.text))
        if inp.startswith(self.text, pos):
            return pos + len(self.text)
        return inp.fail(pos, f"expected {self.text!r}")

    def fast(self, inp: Input, pos: int) -> int:
        if inp.end - pos < len(self.text) and not inp.eof:
            return SLOW
        if inp.startswith(self.text, pos):
            return pos + len(self.text)
        return inp.fail(pos, f"expected {self.text!r}")

    def first(self) -> tuple[str, ...]:
        return (self.text,)

    def nullable(self) -> bool:
        return not self.text


@dataclass(eq=False)
class Marker(Parser):
    """A control marker with the whitespace the template writes before/after it.

    The core must match exactly; leading whitespace is taken when present (the longest suffix
    of ``before`` that precedes the core), trailing whitespace likewise (the longest prefix of
    ``after``). Text regions before a marker leave such whitespace to it.

    ``ws_before``/``ws_after``: any run of whitespace is taken on that side instead (where the
    marker stands next to other structure, not text: models space markup as they please).
    ``lines``: as a stop, the run of whitespace before it is taken from its first line break on
    (a marker on a line of its own; spaces right after text stay the text's).
    """

    core: str
    before: str = ""
    after: str = ""
    ws_before: bool = False
    ws_after: bool = False
    lines: bool = False

    def loose(self, before: bool = True, after: bool = True, lines: bool = False) -> "Marker":
        """The same marker taking any whitespace on the sides asked for (``lines``: see above)."""
        return Marker(self.core, self.before, self.after, before, after, lines)

    @classmethod
    def of(cls, text: str) -> "Marker":
        """The marker ``text`` writes: its core, with the whitespace around it.

        Example::

            >>> m = Marker.of(" <tool_call>\\n")
            >>> m.core, m.before, m.after
            ('<tool_call>', ' ', '\\n')
        """
        core = text.strip()
        if not core:
            return cls(text, "", "")
        i = text.find(core)
        return cls(core, text[:i], text[i + len(core):])

    @classmethod
    def stop(cls, text: str) -> "Marker":
        """A marker that ends a text region: with the whitespace the template writes before it
        (the template's, not the text's); what follows the core is not looked at."""
        m = cls.of(text)
        return cls(m.core, m.before)

    def run(self, inp: Input, pos: int) -> Run:
        if self.ws_before:
            pos = yield from skip_ws(inp, pos)
        if self._indented is not None:  # a marker on its own line may be indented
            while True:
                m = self._indented.match(inp.text, pos - inp.base, partial=not inp.eof)
                if m is None or not m.partial:
                    break
                yield NEED
            if m is None:
                return inp.fail(pos, f"expected {self.core!r}")
            pos = m.end() + inp.base
            return (yield from self._after(inp, pos))
        yield from _wait_for(inp, pos, len(self.before) + len(self.core))
        for k in range(len(self.before), -1, -1):
            lead = self.before[len(self.before) - k:]
            if inp.startswith(lead + self.core, pos):
                pos += k + len(self.core)
                break
            yield from _wait_for(inp, pos, k + len(self.core))
        else:
            return inp.fail(pos, f"expected {self.core!r}")
        return (yield from self._after(inp, pos))

    def _after(self, inp: Input, pos: int) -> Run:
        if self.ws_after:
            return (yield from skip_ws(inp, pos))
        for k in range(len(self.after), 0, -1):
            yield from _wait_for(inp, pos, k)
            if inp.startswith(self.after[:k], pos):
                return pos + k
        return pos

    def __post_init__(self) -> None:
        # what may stand at the start, longest first; what may follow the core, longest first
        self._leads = tuple(self.before[len(self.before) - k:] + self.core for k in range(len(self.before), -1, -1))
        self._afters = tuple(self.after[:k] for k in range(len(self.after), 0, -1))
        self._need = len(self.before) + len(self.core) + len(self.after)
        self._indented = None
        if "\n" in self.before and not self.ws_before and self.core:
            alts = []
            for k in range(len(self.before), -1, -1):
                s = self.before[len(self.before) - k:]
                alts.append(regex.escape(s[:s.rfind("\n") + 1]) + "[ \t]*" if "\n" in s else regex.escape(s))
            self._indented = regex.compile("(?:" + "|".join(alts) + ")" + regex.escape(self.core))

    def fast(self, inp: Input, pos: int) -> int:
        text, i = inp.text, pos - inp.base
        if self.ws_before:
            i = _WS_RUN.match(text, i).end()
            if i >= len(text) and not inp.eof:
                return SLOW
        if self._indented is not None:
            m = self._indented.match(text, i, partial=not inp.eof)
            if m is None:
                return inp.fail(i + inp.base, f"expected {self.core!r}")
            if m.partial:
                return SLOW
            i = m.end()
            if self.ws_after:
                i = _WS_RUN.match(text, i).end()
                return i + inp.base if i < len(text) or inp.eof else SLOW
            if not inp.eof and len(text) - i < len(self.after):
                return SLOW
            return next((i + len(a) for a in self._afters if text.startswith(a, i)), i) + inp.base
        if inp.end - i - inp.base < self._need and not inp.eof:
            return SLOW
        for lead in self._leads:
            if text.startswith(lead, i):
                i += len(lead)
                break
        else:
            return inp.fail(i + inp.base, f"expected {self.core!r}")
        if self.ws_after:
            i = _WS_RUN.match(text, i).end()
            return i + inp.base if i < len(text) or inp.eof else SLOW
        for a in self._afters:
            if text.startswith(a, i):
                return i + len(a) + inp.base
        return i + inp.base

    def first(self) -> tuple[str, ...]:
        return self._leads[::-1]

    def nullable(self) -> bool:
        return not self.core


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


def drive(run: Run) -> int:
    """The result of a parser run that cannot wait (all input at hand)."""
    try:
        next(run)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("a parser waited for input after the end of input")


class Driven(Parser):
    """A parser whose run never waits once the input is complete: with all of it at hand,
    ``fast`` runs it through (no coroutine is needed above it)."""

    def fast(self, inp: Input, pos: int) -> int:
        return drive(self.run(inp, pos)) if inp.eof else SLOW


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
class Repeat(Parser):
    """``item (sep item)*``, at least ``min`` times.

    Whether another item follows is decided by the longest literal the input starts with:
    ``sep`` followed by one of the item's first literals (or the item's first literal, without
    a separator) continues; one of ``closers`` (what follows the repetition) stops. With an
    item that starts with no literal (``key=value``), the separator alone decides, and zero
    items are taken when a closer comes first. ``skip_ws``: whitespace before the next item
    does not count when deciding (the item skips it itself).
    """

    item: Parser
    sep: Parser | None = None
    min: int = 1
    max: int | None = None
    closers: tuple[str, ...] = ()
    skip_ws: bool = False

    def _continue_guards(self) -> tuple[str, ...] | None:
        first = self.item.first()
        item_lits = tuple(x for x in first if x) if first else ()
        if self.sep is None:
            return item_lits or None
        seps = guards_of(self.sep)
        if not item_lits:
            return seps
        # a separator alone continues only when it is not blank (a blank one may end the list:
        # "\n" before the end of the turn); the item may then come after more whitespace
        return tuple(s + f for s in seps for f in item_lits) + tuple(s for s in seps if s.strip())

    def _closers(self) -> tuple[str, ...]:
        """The closers, also behind a whitespace separator (``\n<|im_end|>`` stops a repetition
        whose separator is ``\n``)."""
        seps = guards_of(self.sep) if self.sep is not None else ()
        return self.closers + tuple(s + c for s in seps if s and not s.strip() for c in self.closers)

    @cached_property
    def _guards(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]:
        """(guards of the first item, guards of another item, closers)."""
        first = self.item.first()
        return (tuple(x for x in first if x) if first else None), self._continue_guards(), self._closers()

    @cached_property
    def _eof_patterns(self) -> dict[tuple[str, ...] | None, re.Pattern | None]:
        """The decision pattern per guards (see :func:`_decision_pattern`), filled as used."""
        return {}

    @cached_property
    def _more(self) -> Callable[[Input, int, int], tuple[int, int]] | None:
        """The item's :meth:`~Parser.fast_more` when the items it reads in a row need no
        decision between them: each starts, past the whitespace the decision skips, with a
        literal that continues the repetition, where no closer can match."""
        lead, (_, cont, closers) = self.item.lead(), self._guards
        if lead is None or not lead[0].strip() or self.sep is not None or not self.skip_ws or not cont:
            return None
        if not any(g and lead.startswith(g) for g in cont):
            return None
        if any(c.startswith(lead) or lead.startswith(c) for c in closers if c):
            return None
        return self.item.fast_more

    def _eof_pattern(self, cont: tuple[str, ...] | None, closers: tuple[str, ...]) -> re.Pattern | None:
        rx = self._eof_patterns.get(cont)
        if rx is None and cont not in self._eof_patterns:
            rx = self._eof_patterns[cont] = _decision_pattern(cont or (), closers)
        return rx

    def _next_at(self, inp: Input, pos: int) -> int:
        """Where the next item would start (past whitespace with ``skip_ws``)."""
        return _WS_RUN.match(inp.text, pos - inp.base).end() + inp.base if self.skip_ws else pos

    @staticmethod
    def _at_eof(inp: Input, at: int, cont: tuple[str, ...] | None, rx: re.Pattern | None) -> bool:
        """The decision with the whole input at hand (nothing pending: the longest guard at
        ``at`` decides, a closer on a tie)."""
        m = rx.match(inp.text, at - inp.base) if rx is not None else None
        if cont is None:
            return m is None and at < inp.end
        return m is not None and m.lastgroup[0] == "c"

    def _decision(self, inp: Input, pos: int, cont: tuple[str, ...] | None,
                  closers: tuple[str, ...]) -> bool | None:
        """True to parse another item, False to stop, None while more input may decide."""
        at = self._next_at(inp, pos)
        if self.skip_ws and at >= inp.end and not inp.eof:
            return None
        if inp.eof:
            return self._at_eof(inp, at, cont, self._eof_pattern(cont, closers))
        hit_c, pend_c = guard_state(inp, at, cont or ())
        hit_s, pend_s = guard_state(inp, at, closers)
        if (pend_c or pend_s) and not inp.eof and not (hit_c and not pend_s and not self.closers):
            inp.wake = wake_for(inp, at, (cont or ()) + closers)  # a longer guard may still match
            return None
        if cont is None:  # the item starts with no literal: anything but a closer is an item
            return hit_s is None and (at < inp.end)
        if hit_c is None:
            return False
        return hit_s is None or len(hit_c) > len(hit_s)

    def _decide(self, inp: Input, pos: int, cont: tuple[str, ...] | None) -> Run:
        closers = self._guards[2]
        while (go := self._decision(inp, pos, cont, closers)) is None:
            yield NEED
        return go

    def run(self, inp: Input, pos: int) -> Run:
        count = 0
        start_guards, cont, _ = self._guards
        if self.min == 0:
            go = yield from self._decide(inp, pos, start_guards)
            if not go:
                return pos
        while True:
            r = self.item.fast(inp, pos)
            pos = (yield from self.item.run(inp, pos)) if r == SLOW else r
            if pos == FAIL:
                return FAIL
            count += 1
            if self.max is not None and count >= self.max:
                return pos
            go = yield from self._decide(inp, pos, cont)
            if not go:
                return pos if count >= self.min else inp.fail(pos, "too few items")
            if self.sep is not None:
                r = self.sep.fast(inp, pos)
                pos = (yield from self.sep.run(inp, pos)) if r == SLOW else r
                if pos == FAIL:
                    return FAIL

    def fast(self, inp: Input, pos: int) -> int:
        if not inp.eof:
            return SLOW
        start_guards, cont, closers = self._guards
        if self.min == 0 and not self._decision(inp, pos, start_guards, closers):
            return pos
        m = mark(inp)
        count = 0
        # (``_decision`` at the end of input: ``_next_at`` and ``_at_eof`` inlined, once per item)
        item, sep, most, rx = self.item, self.sep, self.max, self._eof_pattern(cont, closers)
        text, base, end, ws = inp.text, inp.base, inp.end, _WS_RUN.match if self.skip_ws else None
        more = self._more if inp.whole else None
        while True:
            pos = item.fast(inp, pos)
            if pos < 0:
                return rollback(inp, m)
            count += 1
            if more is not None:  # (items read in a row: each would have been decided on)
                pos, n = more(inp, pos, most - count if most is not None else NO_LIMIT)
                count += n
            if most is not None and count >= most:
                return pos
            at = ws(text, pos - base).end() if ws is not None else pos - base
            hit = rx.match(text, at) if rx is not None else None
            if not (hit is None and at + base < end if cont is None else hit is not None and hit.lastgroup[0] == "c"):
                return pos if count >= self.min else rollback(inp, m)
            if sep is not None:
                pos = sep.fast(inp, pos)
                if pos < 0:
                    return rollback(inp, m)

    def first(self) -> tuple[str, ...] | None:
        f = self.item.first()
        if self.min == 0 and f is not None:
            return f + ("",)
        return f

    def nullable(self) -> bool:
        return self.min == 0


class Until(Parser):
    """Text up to the first of ``stops`` (not consumed) or the end of input.

    The text is streamed as ``chunk`` events of ``tag`` as soon as it cannot be the start of a
    stop marker. Whitespace that a stop marker writes before its core is left to the marker. A
    ``fence`` found before a stop fails it (a name does not run over the markers around it).
    """

    def __init__(self, stops: Sequence[Marker], tag: str | None = None, *, to_end: bool = True,
                 tail: str = "", end_if: Callable[[str], bool] | None = None, fences: Sequence[str] = ()) -> None:
        self.stops = [s for s in stops if s.core]
        self.tag = tag
        self.to_end = to_end  # without a stop, the text runs to the end of input
        self.end_if = end_if  # (not to_end) the text may still run to the end when this approves it
        self.tail = tail  # whitespace that, ending the input, is the template's (a blank end of turn)
        self.cores = [s.core for s in self.stops]
        ws = "".join(s.before + (" \t\r\n" if s.ws_before else " \t" if "\n" in s.before else "")
                     for s in self.stops) + tail
        # whitespace a stop takes before it matters only at the end of what arrived so far
        self.stop_chars = frozenset("".join(c[0] for c in self.cores))
        self.ws_chars = frozenset(ws)
        self.ws = "".join(sorted(c for c in self.ws_chars if c.isspace()))
        # no stop takes spaces or tabs but as the indentation of a marker on its own line
        self.lines = all((not s.ws_before or s.lines) and not s.before.strip("\r\n") for s in self.stops) and \
            not tail.strip("\r\n")
        self.fences = frozenset(fences).difference(self.cores)
        found = set(self.cores) | self.fences
        self.maxlen = max((len(c) for c in found), default=0)
        self._search = marker_search(found) if found else None  # (the longest at one position)
        self._near = alternation_search(found) if found else None  # (the same on a few characters)
        self.maxcore = max((len(c) for c in self.cores), default=0)
        self._prefixes = frozenset(c[:k] for c in self.cores for k in range(1, len(c)))  # (see ``_held``)
        self._by_core: dict[str, list[Marker]] = {}  # the stops of each core (what ``_trim`` reads)
        for stop in self.stops:
            self._by_core.setdefault(stop.core, []).append(stop)

    def _emit(self, inp: Input, a: int, b: int) -> None:
        if b > a:
            inp.emit(inp.tag(self.tag), inp.get(a, b), b)

    def _held(self, inp: Input, a: int) -> int:
        """The first position from which the tail may still become a stop (partial core, or
        whitespace a stop writes before itself)."""
        end = inp.end
        cut = end
        text, base = inp.text, inp.base
        for j in range(max(a, end - self.maxcore + 1), end):  # (the earliest proper prefix of a core)
            if text[j - base] in self.stop_chars and text[j - base:end - base] in self._prefixes:
                cut = j
                break
        j = cut
        while j > a and inp.get(j - 1, j) in self.ws_chars and inp.get(j - 1, j).isspace():
            j -= 1
        return j

    def _past_empty_fence(self, inp: Input, m: re.Match, start: int) -> re.Match | None:
        """A fence right at ``start`` (an empty field) is passed over: the field then fails the
        usual way if nothing else comes."""
        while m is not None and m.start() + inp.base == start and m.group(0) in self.fences:
            m = self._search(inp.text, m.end())
        return m

    def _finish(self, inp: Input, emitted: int, hit: int, core: str) -> int:
        if self.fences and core in self.fences:
            return inp.fail(emitted, f"{core!r} at {hit} before " + " or ".join(repr(c) for c in self.cores))
        end = self._trim(inp.text, emitted - inp.base, hit - inp.base, core) + inp.base
        self._emit(inp, emitted, end)
        inp.keep_from = end
        return end

    def _trim(self, text: str, emitted: int, hit: int, core: str) -> int:
        """Where the text before the stop ``core`` found at ``hit`` ends: before the whitespace
        that belongs to the marker (the most any stop with that core claims). Indices into
        ``text``."""
        end = hit
        for stop in self._by_core[core]:
            if stop.ws_before:  # any whitespace before the marker is the marker's
                k = hit
                while k > emitted and text[k - 1] in " \t\r\n":
                    k -= 1
                while stop.lines and k < hit and text[k] in " \t":  # (from its first line break)
                    k += 1
                end = min(end, k)
                continue
            starts = [hit]
            if "\n" in stop.before:  # a marker on a line of its own may be indented
                at = hit
                while at > emitted and text[at - 1] in " \t":
                    at -= 1
                starts.append(at)
            for at in starts:
                for k in range(len(stop.before), 0, -1):
                    if at - k >= emitted and at - k < end and text.startswith(stop.before[len(stop.before) - k:], at - k):
                        end = at - k
                        break
        return end

    def search(self, text: str, i: int) -> re.Match | None:
        """The first stop or fence in ``text`` from ``i`` (``searcher``: the same, faster)."""
        return self._search(text, i) if self._search is not None else None

    @property
    def searcher(self) -> Callable[[str, int], re.Match | None]:
        return self._search if self._search is not None else self.search

    def rules(self, core: str) -> list[Marker]:
        """The stops whose core is ``core`` (together they say what whitespace it takes)."""
        return self._by_core.get(core, [])

    def end_in(self, text: str, i: int) -> int:
        """Where this text, from ``i`` of a complete ``text``, ends at one of its stops (what a
        one-shot :meth:`fast` reads, without events); -1 when it does not end at a stop (none
        follows, or a fence comes first)."""
        if self._search is None:
            return -1
        m = self._search(text, i)
        fences = self.fences
        while m is not None and m.start() == i and m.group(0) in fences:
            m = self._search(text, m.end())
        if m is None or m.group(0) in fences:
            return -1
        return self._trim(text, i, m.start(), m.group(0))

    def _to_end(self, inp: Input, emitted: int) -> int:
        end = inp.end
        for k in range(min(len(self.tail), end - emitted), 0, -1):
            if inp.startswith(self.tail[:k], end - k):
                end -= k
                break
        self._emit(inp, emitted, end)
        return inp.end

    def _pending_at(self, inp: Input, hit: int, start: int) -> int:
        """Where a stop may still match, at or before where one did, once more input comes (a
        longer one, or one that begins earlier and overlaps it): the one-shot parse would take
        that one. -1 when none may."""
        if inp.eof:
            return -1
        text, base, end = inp.text, inp.base, inp.end
        for j in range(max(start, end - self.maxcore + 1), hit + 1):  # (a proper prefix of a core)
            if text[j - base] in self.stop_chars and text[j - base:end - base] in self._prefixes:
                return j
        return -1

    def fast(self, inp: Input, pos: int) -> int:
        at = pos - inp.base  # (a few characters, streaming: the plain alternation, inline)
        m = (self._near if len(inp.text) - at <= SHORT else self._search)(inp.text, at) if self._search else None
        if self.fences and m is not None:
            m = self._past_empty_fence(inp, m, pos)
        if m is not None:
            if self._pending_at(inp, m.start() + inp.base, pos) >= 0:
                return SLOW
            return self._finish(inp, pos, m.start() + inp.base, m.group(0))
        if inp.eof:
            if not self.to_end and not (self.end_if is not None and self.end_if(inp.get(pos, inp.end))):
                return inp.fail(inp.end, "expected " + " or ".join(repr(c) for c in self.cores))
            return self._to_end(inp, pos)
        return SLOW

    def run(self, inp: Input, pos: int) -> Run:
        emitted = scan = pos
        tag = inp.tag(self.tag)
        while True:
            if inp.fast is not None and inp.fast.tag == tag:
                emitted = max(emitted, inp.fast.emitted)
            inp.fast = None
            at = max(scan, emitted) - inp.base
            m = (self._near if len(inp.text) - at <= SHORT else self._search)(inp.text, at) if self._search else None
            if self.fences and m is not None:
                passed = m
                m = self._past_empty_fence(inp, m, emitted)
                if m is not passed:  # (later searches start after the fence passed over: not at its own '>')
                    scan = max(scan, passed.end() + inp.base)
            pending = self._pending_at(inp, m.start() + inp.base, emitted) if m is not None else -1
            if pending >= 0:
                if self.to_end:
                    safe = min(self._held(inp, emitted), pending)
                    self._emit(inp, emitted, safe)
                    emitted = max(emitted, safe)
                    inp.keep_from = emitted
                scan = pending
                yield NEED
                continue
            if m is not None:
                return self._finish(inp, emitted, m.start() + inp.base, m.group(0))
            if inp.eof:
                if not self.to_end and not (self.end_if is not None and self.end_if(inp.get(emitted, inp.end))):
                    return inp.fail(inp.end, "expected " + " or ".join(repr(c) for c in self.cores))
                return self._to_end(inp, emitted)
            if not self.to_end:  # the text counts only once its stop is found: nothing streams before
                scan = max(scan, inp.end - self.maxlen + 1)
                yield NEED
                continue
            safe = self._held(inp, emitted)
            self._emit(inp, emitted, safe)
            emitted = max(emitted, safe)
            inp.keep_from = emitted
            scan = max(emitted, inp.end - self.maxlen + 1)
            held = emitted == inp.end or not inp.get(emitted, inp.end).strip(self.ws)
            inp.fast = _Fast(self.stop_chars, tag, emitted, self.ws, self.lines) if held else None
            yield NEED


_JSON_WS = " \t\n\r"
_STRING_BODY = re.compile(r'[^"\\]+')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = ("true", "false", "null")
_NUMBER_CHARS = "0123456789+-.eE"
_CLOSING = {"{": "}", "[": "]", '"': '"'}


def number_cut(text: str, i: int, end: int) -> bool:
    """The C decoder read a number at ``i`` that goes on at ``end`` ("2." or "1e"): it took a
    prefix of a number the scanner refuses (the scanner says where and why)."""
    return end < len(text) and text[end] in _NUMBER_CHARS and text[i] in "-0123456789"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# shared: building a decoder costs more than a small decode. NaN/Infinity are refused as the
# streaming scanner refuses them (one-shot and streamed parses must agree).
DECODER = json.JSONDecoder(parse_constant=_no_constant)
SCAN = DECODER.scan_once  # (text, index) -> (value, end); StopIteration/ValueError when invalid


class JsonValue(Parser):
    """One JSON value, scanned as it arrives (strings, numbers, literals, nesting by a stack);
    its raw bytes stream as ``chunk`` events of ``tag``. Leading whitespace is skipped."""

    def __init__(self, tag: str | None = None) -> None:
        self.tag = tag

    def _emit(self, inp: Input, a: int, b: int) -> None:
        if b > a:
            inp.emit(inp.tag(self.tag), inp.get(a, b), b)

    def _fail(self, inp: Input, emitted: int, at: int, message: str) -> int:
        """Fails at ``at``, the text scanned before it emitted first (so that what follows is
        read from the same place however the input was chunked)."""
        self._emit(inp, emitted, at)
        return inp.fail(at, message)

    def fast(self, inp: Input, pos: int) -> int:
        """A value already complete in the buffer is found by the C decoder (a number is
        complete only when something follows it)."""
        i = pos - inp.base
        text = inp.text
        while i < len(text) and text[i] in _JSON_WS:
            i += 1
        if i >= len(text) or text[i] in "NI":
            return SLOW
        if not inp.eof and text[i] in _CLOSING and text.find(_CLOSING[text[i]], i + 1) < 0:
            return SLOW  # cannot be complete yet (spares the decoder's exception)
        try:
            _, end = DECODER.raw_decode(text, i)
        except ValueError:
            return SLOW  # the scanner says where and why
        if end >= len(text) and not inp.eof and text[i] not in '"{[':
            return SLOW  # a number or literal may go on
        if number_cut(text, i, end):
            return SLOW
        self._emit(inp, i + inp.base, end + inp.base)
        return end + inp.base

    def run(self, inp: Input, pos: int) -> Run:
        while True:  # leading whitespace
            while pos < inp.end and inp.text[pos - inp.base] in _JSON_WS:
                pos += 1
            if pos < inp.end or inp.eof:
                break
            yield NEED
        start = pos
        if inp.eof and pos < inp.end and inp.text[pos - inp.base] not in "NI":  # the whole value is here: the C decoder finds its end
            text, i = inp.text, pos - inp.base
            try:
                _, end = DECODER.raw_decode(text, i)
            except ValueError:
                pass  # the scanner below says where and why
            else:
                if not number_cut(text, i, end):
                    self._emit(inp, start, end + inp.base)
                    return end + inp.base
        scan = _JsonScan(inp.tag(self.tag), pos)
        while True:
            r = scan.step(inp)
            if r is None:
                if inp.eof:
                    if scan.state == _NUM and not scan.stack and _NUMBER.fullmatch(scan.num):
                        self._emit(inp, scan.emitted, inp.end)
                        return inp.end
                    return self._fail(inp, scan.emitted, inp.end, "unterminated JSON value")
                self._emit(inp, scan.emitted, inp.end)
                scan.emitted = inp.keep_from = inp.end
                inp.fast = scan  # the driver scans the next chunks itself while the value goes on
                yield NEED
                inp.fast = None
                continue
            if r == FAIL:
                return self._fail(inp, scan.emitted, scan.fail_at, scan.message)
            self._emit(inp, scan.emitted, r)
            return r

    def first(self) -> tuple[str, ...] | None:
        return None


_VALUE, _AFTER, _STR, _ESC, _NUM, _LIT = range(6)
_STRING_STOP = frozenset('"\\')
_STRING_STOPS = re.compile(r'["\\]')


class _JsonScan(_Fast):
    """The state of one JSON value being scanned (strings, numbers, literals, nesting by a
    stack), kept between chunks. ``step`` scans what has arrived: the end of the value, FAIL
    (``fail_at``, ``message``) or None when it goes on. It has no side effects on the input,
    so the driver may call it on a new chunk and, while the value goes on, emit the chunk
    without resuming the parser stack; otherwise the parser resumes and reads the result."""

    __slots__ = ("stack", "state", "lit", "num", "result", "fail_at", "message")
    scan = True

    def __init__(self, tag: str | None, pos: int) -> None:
        super().__init__(None, tag, pos)  # scanned up to ``emitted``; inside a string, a chunk
        self.stack: list[str] = []        # without '"' or '\\' is plain (``stop``)
        self.state = _VALUE
        self.lit = ""   # a literal (true/false/null) so far
        self.num = ""   # a number so far (checked whole when it ends)
        self.result: int | None = None
        self.fail_at = pos
        self.message = ""

    def _fail(self, at: int, message: str) -> int:
        self.result, self.fail_at, self.message = FAIL, at, message
        return FAIL

    def step(self, inp: Input) -> int | None:
        return self.scan_text(inp.text, self.emitted - inp.base, inp.end - inp.base, inp.base)

    def goes_on(self, chunk: str) -> bool:
        """Whether the value goes on past ``chunk``, the next text after what was scanned (that
        the input has not been fed): if so, the state is past it; if not, it is as before."""
        saved = self.state, self.stack[:], self.lit, self.num, self.stop
        if self.scan_text(chunk, 0, len(chunk), 0) is None:
            return True
        self.state, self.stack, self.lit, self.num, self.stop = saved
        self.result = None
        return False

    def scan_text(self, text: str, i: int, n: int, base: int) -> int | None:
        """Scans ``text[i:n]`` (``base``: the position of ``text[0]``)."""
        if self.result is not None:
            return self.result
        state, stack = self.state, self.stack
        while i < n:
            if state == _STR:
                m = _STRING_STOPS.search(text, i)
                if m is None:
                    i = n
                    continue
                i = m.end()
                if m.group() == "\\":
                    state = _ESC
                else:
                    state = _AFTER
                    if not stack:
                        break
                continue
            ch = text[i]
            if state == _ESC:
                i += 1
                state = _STR
            elif state == _NUM:
                if ch in _NUMBER_CHARS:
                    self.num += ch
                    i += 1
                    continue
                if not _NUMBER.fullmatch(self.num):
                    return self._fail(i + base - len(self.num), "invalid JSON number")
                state = _AFTER
                if not stack:
                    break
            elif state == _LIT:
                self.lit += ch
                i += 1
                if self.lit in _LITERALS:
                    state = _AFTER
                    if not stack:
                        break
                elif not any(x.startswith(self.lit) for x in _LITERALS):
                    return self._fail(i + base, "invalid JSON literal")
            elif ch in _JSON_WS:
                i += 1
            elif state == _VALUE:
                i += 1
                if ch == '"':
                    state = _STR
                elif ch == "{":
                    stack.append("}")
                elif ch == "[":
                    stack.append("]")
                elif ch in "-0123456789":
                    state, self.num = _NUM, ch
                elif ch in "tfn":
                    state, self.lit = _LIT, ch
                elif ch in "}]" and stack and ch == stack[-1]:  # empty container
                    stack.pop()
                    state = _AFTER
                    if not stack:
                        break
                else:
                    return self._fail(i - 1 + base, "invalid JSON")
            else:  # after a value inside a container
                i += 1
                if ch == "," or ch == ":":
                    state = _VALUE
                elif stack and ch == stack[-1]:
                    stack.pop()
                    if not stack:
                        break
                else:
                    return self._fail(i - 1 + base, "invalid JSON")
        else:
            self.state = state
            self.stop = _STRING_STOP if state == _STR else None
            return None
        self.state, self.result = state, i + base
        return i + base


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


class Session:
    """Drives one parser over input that arrives in pieces.

    ``feed(chunk)`` returns the events the chunk completed; ``finish()`` marks the end of input
    and returns ``(end, events)`` where ``end`` is the position parsing stopped at (``FAIL``
    with ``inp.error_pos`` on failure).
    """

    def __init__(self, parser: Parser) -> None:
        self.inp = Input()
        self._parser = parser
        self._gen = parser.run(self.inp, 0)
        self.result: int | None = None
        self._started = False
        self.taken = ""  # the text the last ``take`` emitted by the waiting parser's shortcut

    def _resume(self) -> None:
        if not self._started:
            r = self._parser.fast(self.inp, 0)
            if r != SLOW:
                self._started = True
                self.result = r
                return
        self.inp.wake = 0
        try:
            if not self._started:
                self._started = True
                next(self._gen)
            else:
                self._gen.send(None)
        except StopIteration as stop:
            self.result = stop.value if stop.value is not None else FAIL

    def absorb(self, chunk: str) -> str | None:
        """Feeds ``chunk``; when the waiting parser's shortcut takes it whole (plain text of a
        region, or a JSON value that goes on), returns the tag it was emitted under ('' for
        none) and the parser is not resumed; None when the parser must resume."""
        inp = self.inp
        fast = inp.fast
        if fast is None:
            inp.feed(chunk)
            return "" if inp.end < inp.wake else None  # the parser waits for more than this
        stop = fast.stop
        plain = stop is not None and stop.isdisjoint(chunk)  # (``_Fast.plain``)
        if not (plain or fast.scan) or inp.holds:
            inp.feed(chunk)
            return None
        tag = fast.tag
        start = fast.emitted
        if inp.pins or (inp.soft_pins and not tag):
            inp.feed(chunk)  # a parser reads this text back
        elif start == inp.end:  # everything before is emitted and not needed again: keep only the chunk
            inp.text, inp.base = chunk, inp.end
            inp.end += len(chunk)
        else:  # the same, after the whitespace held back
            inp.text, inp.base = inp.get(start, inp.end) + chunk, start
            inp.end += len(chunk)
        if not plain:
            if fast.step(inp) is not None:
                return None  # the value ends (or breaks) in this chunk
        end = inp.end
        if fast.ws and chunk[-1] in fast.ws:
            body = len(chunk.rstrip(fast.ws))
            if not body:  # whitespace only: held with what was
                self.taken = ""
                return tag or ""
            end -= len(chunk) - body
        self.taken = chunk if start + len(chunk) == end == inp.end else inp.get(start, end)
        fast.emitted = inp.keep_from = end
        if tag:
            inp.chunks += 1
            inp.chunk_pos = end
            if inp.soft_pins:
                inp.soft_pins.clear()
        return tag or ""

    def take(self, chunk: str) -> str | None:
        """Feeds ``chunk``: the tag its text was emitted under ('' for none; the text is
        ``taken``: the chunk, less whitespace held back at its end, after whitespace held
        before), or None when the parser resumed (its events wait in ``inp.events``)."""
        if not chunk:
            return ""
        if self.result is not None:
            self.inp.feed(chunk)
            return ""
        tag = self.absorb(chunk)
        if tag is None:
            self._resume()
            if self.result is not None:
                self.inp.fast = None
        return tag

    def feed(self, chunk: str) -> list[Event]:
        tag = self.take(chunk)
        if tag is None:
            return self.inp.drain()
        return [("chunk", tag, self.taken)] if tag and self.taken else []

    def start_whole(self, text: str, whole: bool = True) -> None:
        """Parse a complete text at once (the one-shot path: no coroutine where none is needed;
        ``whole``: see :meth:`Input.set_text`)."""
        self.inp.set_text(text, whole)
        self._resume()

    def finish(self) -> tuple[int, list[Event]]:
        self.inp.eof = True
        if self.result is None:
            self._resume()
        out = self.inp.drain()
        return (self.result if self.result is not None else FAIL), out


def run_all(parser: Parser, text: str) -> tuple[int, list[Event]]:
    """Parse a complete text: ``(end position or FAIL, events)``."""
    s = Session(parser)
    s.start_whole(text, whole=False)
    return (s.result if s.result is not None else FAIL), s.inp.events
