"""The PEG runtime: the shared input buffer (:class:`Input`), the parser protocol
(:class:`Parser`, its ``fast`` shortcut and the ``run`` coroutine), the helpers parsers share
(whitespace, wake-up positions, deviations, rollback) and the driver (:class:`Session`)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Generator, Iterable

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
