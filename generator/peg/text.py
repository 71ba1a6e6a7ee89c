"""Parsers of text: literals and markers (:class:`Lit`, :class:`Marker`), whitespace, and
:class:`Until`, text up to the first of some markers, streamed as it arrives."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import regex

from ..marker_search import SHORT, alternation_search, marker_search
from .runtime import (
    _WS_RUN,
    FAIL,
    NEED,
    SLOW,
    Input,
    Parser,
    Run,
    _Fast,
    _wait_for,
    skip_ws,
)


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
