"""Combinators that keep malformed output instead of failing on it.

* :class:`Segments`: the message body, a loop of guarded segments (reasoning block, wrapped
  content, tool section, end of turn); text between them is content, and a segment that breaks
  is reported and its text kept as content.
* :class:`Recover`: a parser whose failure falls back to raw text of the same region (invalid
  JSON arguments keep the call, with the model's own text).
* :class:`Closer`: a closing marker the output may lack when it was cut off.
* :class:`AtEnd`: succeeds only at the end of the input.

Example::

    >>> from chat_autoparser.generator.peg import Capture, Seq, Until, run_all
    >>> body = Segments([(("<b>",), Seq(Marker("<b>"), Capture("bold", Until([Marker("</b>")])), Marker("</b>")))],
    ...                 [Marker("<b>")])
    >>> [e for e in run_all(body, "x<b>y</b>")[1] if e[0] == "chunk"]
    [('chunk', 'content', 'x'), ('chunk', 'bold', 'y')]
"""

from __future__ import annotations

from typing import Sequence

from .marker_search import marker_search
from .peg import (FAIL, NEED, SLOW, Capture, Choice, Driven, Input, Marker, Parser, Run, Until, guard_state, mark,
                  rollback, skip_ws)

FENCE = "```"  # (a code block's fence: three backticks or more)


class Segments(Parser):
    """The body: guarded segments until the end of input; text between them is ``default``.

    A segment that fails is not fatal: an ``("abort", start, pos, message)`` event reports it;
    if it emitted no text yet, its text becomes content, else parsing resumes where it failed.
    """

    def __init__(self, alternatives: Sequence[tuple[tuple[str, ...], Parser]], stops: Sequence[Marker],
                 tail: str = "", ends: Sequence[str] = (), text_guards: Sequence[str] = ()) -> None:
        self.alternatives = [(g, p) for g, p in alternatives if g]
        self.guards = tuple(g for gs, _ in self.alternatives for g in gs if g)
        # the guards of segments that are text (a fenced code block): the whitespace before
        # them is text too, not structure's
        self.text_guards = frozenset(text_guards)
        self.choice = Choice(self.alternatives, None)
        self.stops = list(stops)
        self._ends = {"", *ends}  # the markers that end the turn
        self.tail = tail
        self.text = Capture("content", Until(self.stops, tail=tail))  # what no segment starts
        self.whole = Choice(self.alternatives, self.text)  # with all the input at hand: no coroutines

    def _structural_ws(self, inp: Input, pos: int, after_segment: bool) -> Run:
        """Where a run of whitespace at ``pos`` ends when it stands between pieces of structure
        (before a segment, or after one at the end of the output): it is theirs, not content.
        ``pos`` itself when it is not such a run."""
        q = yield from skip_ws(inp, pos)
        if q == pos:
            return pos
        if q >= inp.end and inp.eof:
            return q if after_segment else pos
        hit = yield from _guard_at(inp, q, self.guards)
        return q if hit is not None and hit not in self.text_guards else pos

    def run(self, inp: Input, pos: int) -> Run:
        default, whole = self.text, self.whole
        after_segment = False
        while True:
            while inp.end <= pos and not inp.eof:
                yield NEED
            if pos >= inp.end and inp.eof:
                return pos
            ws_from = pos  # whitespace before a segment is the segment's, or text if none follows
            if inp.get(pos, pos + 1) in _WS_CHARS:
                pos = yield from self._structural_ws(inp, pos, after_segment)
                if pos >= inp.end and inp.eof:
                    return pos
            after_segment = True
            if inp.eof:
                m = mark(inp)
                end = whole.fast(inp, pos)
                if end > pos:
                    pos = end
                    continue
                rollback(inp, m)  # a broken segment (or none): reported the coroutine way
            start = pos
            n_events = inp.n_events
            chunks_before = inp.chunks
            inp.error_pos, inp.error = -1, ""
            pos = yield from _pinned(inp, ws_from, self._segment(inp, start, n_events, chunks_before, default, ws_from))

    def _segment(self, inp: Input, pos: int, n_events: int, chunks_before: int, default: Parser,
                 ws_from: int) -> Run:
        """One segment from ``pos`` (or the text that stands for it, from ``ws_from``: the
        whitespace before it is text when no segment follows); the position after it."""
        start = pos
        end = yield from self.choice.run(inp, pos)
        if end == pos or end == FAIL and inp.error_pos == pos and inp.chunks == chunks_before and \
                inp.n_events == n_events:
            if ws_from < pos:
                inp.events += [("open", "content"), ("chunk", "content", inp.get(ws_from, pos)), ("close", "content")]
            end = yield from default.run(inp, pos)  # no segment starts here: plain text
            if end == pos:  # nothing consumed (an attempt that did not match): one character as text
                inp.events += [("open", "content"), ("chunk", "content", inp.get(pos, pos + 1)),
                               ("close", "content")]
                end = pos + 1
            return end
        if end != FAIL:
            return end
        fail = max(inp.error_pos, start)
        inp.events.append(("abort", start, fail, inp.error or "unexpected text"))
        # text from the end of what was read (the last chunk or the last whole call) is content
        if inp.chunks == chunks_before:
            resume = ws_from
        else:  # after the text it read and the last call of this segment that closed whole
            resume = min(fail, max(start, inp.chunk_pos, inp.region_end))
        at_hand = resume >= inp.base  # (streaming: text a parser skipped untagged may be gone)
        if at_hand and inp.get(resume, fail).strip() in self._ends:  # only the end of the turn: dropped as usual
            resume = fail
        if fail <= resume:
            fail = resume
        # the broken segment's text is content, verbatim, up to where parsing resumes
        upto = max(fail, resume + 1)
        while inp.end < upto and not inp.eof:
            yield NEED
        upto = min(upto, inp.end)
        if upto > resume and resume >= inp.base:
            inp.events += [("open", "content"), ("chunk", "content", inp.get(resume, upto)),
                           ("close", "content")]
        elif upto > resume:  # the driver may still hold it (see ``Assembler.raw``)
            inp.events.append(("content_at", resume, upto))
        return upto


_WS_CHARS = frozenset(" \t\r\n")



def _pinned(inp: Input, start: int, gen: Run) -> Run:
    """Runs ``gen`` keeping the text from ``start`` until it emits text: a failure before that
    rereads it; after that only what follows the emitted text is reread."""
    inp.soft_pin(start)
    try:
        return (yield from gen)
    finally:
        inp.soft_unpin(start)


class AtEnd(Parser):
    """Succeeds only at the end of input (waits for it); fails if more text follows."""

    def run(self, inp: Input, pos: int) -> Run:
        while inp.end <= pos and not inp.eof:
            yield NEED
        if inp.end > pos:
            return inp.fail(pos, "more text follows")
        return pos

    def fast(self, inp: Input, pos: int) -> int:
        if inp.end > pos:
            return inp.fail(pos, "more text follows")
        return pos if inp.eof else SLOW

    def nullable(self) -> bool:
        return True


class Recover(Parser):
    """``main``; if it fails, the rest up to ``stops`` is taken as raw text of the same region
    (an ``("error", pos, message)`` event says so). Used for arguments: invalid JSON keeps the
    call, with the model's raw text."""

    def __init__(self, main: Parser, stops: Sequence[Marker]) -> None:
        self.main = main
        self.fallback_stops = list(stops)

    def run(self, inp: Input, pos: int) -> Run:
        chunks = inp.chunk_pos
        end = yield from _pinned(inp, pos, self.main.run(inp, pos))
        if end != FAIL:
            return end
        resume = max(pos, inp.chunk_pos if inp.chunk_pos > chunks else pos)
        inp.events.append(("error", inp.error_pos, f"{inp.error} (kept as raw text)"))
        inp.recovered = True
        return (yield from Until(self.fallback_stops).run(inp, resume))

    def fast(self, inp: Input, pos: int) -> int:
        m = mark(inp)
        end = self.main.fast(inp, pos)
        return end if end >= 0 else rollback(inp, m)

    def first(self) -> tuple[str, ...] | None:
        return self.main.first()


class Closer(Parser):
    """A closing marker that output cut off at the end may lack: missing at the end of input it
    is reported (``error`` event) but not fatal; missing elsewhere it fails."""

    def __init__(self, marker: Marker) -> None:
        self.marker = marker

    def _cut_off(self, inp: Input, pos: int) -> bool:
        """The input ends (after whitespace) with a proper prefix of the marker."""
        if not inp.eof or inp.end - pos > len(self.marker.core) + 256:
            return False
        rest = inp.get(pos, inp.end).lstrip()
        return len(rest) < len(self.marker.core) and self.marker.core.startswith(rest)

    def _undecided(self, inp: Input, pos: int) -> bool:
        """More input decides: the marker, something else, or the end of input."""
        if inp.eof:
            return False
        core = self.marker.core
        rest = inp.get(pos, min(inp.end, pos + len(core) + 256)).lstrip()
        return len(rest) < len(core) and core.startswith(rest)

    def fast(self, inp: Input, pos: int) -> int:
        if self._cut_off(inp, pos) or self._undecided(inp, pos):
            return SLOW
        return self.marker.fast(inp, pos)

    def run(self, inp: Input, pos: int) -> Run:
        while self._undecided(inp, pos):
            inp.wake = inp.end + len(self.marker.core) - len(inp.get(pos, inp.end).lstrip())
            yield NEED
        if self._cut_off(inp, pos):
            inp.events.append(("error", pos, f"output ends before {self.marker.core!r}"))
            return inp.end
        return (yield from self.marker.run(inp, pos))

    def first(self) -> tuple[str, ...]:
        return self.marker.first()


class TextUntilCall(Driven):
    """Text of region ``tag`` up to the first of ``stops``, or up to where a well-formed call
    starts (a probe's parser succeeds at one of its guards) in a block the model never closes:
    the block ends at the call it writes after it. The call is not read here (the caller reads
    it next); a warning event says the block was not closed. A guard where no call follows is
    text.

    A block that does close (``closer``, one of ``stops``, follows the guard before any other
    stop) keeps its calls as text: a model drafting or quoting a call while it reasons has not
    made it. Streaming, that is known only when the closer, another stop or the end of the
    output arrives: the text from the guard on is held until then. With ``fenced``, a call inside
    a fenced code block is text too, closed block or not (a fence: three or more backticks at
    the start of a line, indented three spaces at most; closed by a run at least as long with
    nothing but spaces after it on its line).
    """

    def __init__(self, tag: str, stops: Sequence[Marker], probes: Sequence[tuple[Sequence[str], Parser]],
                 warning: str, closer: str = "", fenced: bool = False) -> None:
        self.probes = [(tuple(g for g in guards if g.strip()), p) for guards, p in probes]
        self.guards = tuple(g for guards, _ in self.probes for g in guards)
        cores = dict.fromkeys(g.strip() for g in self.guards)  # (whitespace before a guard is any)
        self.fenced = fenced and FENCE not in cores
        # (whitespace before a call or a fence from a line break on is theirs; spaces after text stay text)
        self.text = Until(list(stops) + [Marker(c).loose(after=False, lines=True) for c in cores]
                          + ([Marker(FENCE).loose(after=False, lines=True)] if self.fenced else []), tag)
        self.tag = tag
        self.warning = warning
        self.closer = closer.strip()
        ends = {s.core for s in stops if s.core} | ({self.closer} if self.closer else set())
        self._ends = marker_search(ends) if self.closer else None
        self._ends_len = max((len(e) for e in ends), default=0)
        self._prefixes = frozenset(e[:k] for e in ends for k in range(1, len(e)))

    def _text(self, inp: Input, a: int, b: int) -> None:
        """``inp``'s text from ``a`` to ``b``, a chunk of the region."""
        inp.emit(self.tag, inp.get(a, b), b)

    def _fence_at(self, inp: Input, pos: int, at: int, line_start: bool, open_run: int) -> Run:
        """(the length of the run of backticks at ``at``, whether it is a fence that opens a code
        block (``open_run`` 0) or closes the one ``open_run`` backticks opened), once the input
        shows. The whitespace from ``pos`` to ``at`` says whether it starts a line (``line_start``:
        ``pos`` does)."""
        end = at
        while True:  # (the run, then what follows it on its line: a closer has only spaces after it)
            while end >= inp.end and not inp.eof:
                yield NEED
            if end >= inp.end or inp.get(end, end + 1) != "`":
                break
            end += 1
        run = end - at
        ws = inp.get(pos, at)
        indent = ws[ws.rfind("\n") + 1:] if "\n" in ws else ws if line_start else None
        if run < len(FENCE) or indent is None or len(indent.expandtabs(4)) > 3:
            return run, False
        if not open_run:
            return run, True
        while True:
            while end >= inp.end and not inp.eof:
                yield NEED
            c = inp.get(end, end + 1)
            if c not in (" ", "\t"):
                return run, run >= open_run and c in ("", "\n", "\r")
            end += 1

    def _first_stop(self, inp: Input, pos: int) -> Run:
        """(where the first stop after ``pos`` stands, whether it is ``closer``); (the end of the
        output, False) when none comes. Waits until that is known."""
        search = self._ends
        if search is None:
            return inp.end, False
        scan = pos
        inp.pin(pos)
        try:
            while True:
                m = search(inp.text, scan - inp.base)
                if m is not None and not self._pending(inp, scan, m.start() + inp.base):
                    return m.start() + inp.base, m.group(0) == self.closer
                if m is None and inp.eof:
                    return inp.end, False
                scan = m.start() + inp.base if m is not None else max(scan, inp.end - self._ends_len + 1)
                yield NEED
        finally:
            inp.unpin(pos)

    def _pending(self, inp: Input, scan: int, hit: int) -> bool:
        """More input may still make another stop match at or before ``hit`` (a longer one:
        ``<|end|><|start|>assistant`` where ``<|end|>`` was found)."""
        if inp.eof:
            return False
        tail = inp.get(max(scan, inp.end - self._ends_len + 1), inp.end)
        first = inp.end - len(tail)
        return any(tail[j:] in self._prefixes for j in range(0, min(len(tail), hit - first + 1)))

    def run(self, inp: Input, pos: int) -> Run:
        inp.events.append(("open", self.tag))
        try:
            return (yield from self._body(inp, pos))
        finally:
            inp.events.append(("close", self.tag))

    def _body(self, inp: Input, pos: int) -> Run:
        start = pos
        fence = 0  # the length of the fence of the code block the text is in (0: none)
        decided = (-1, False)  # (where the first stop after the last guard looked at stands, is it the closer)
        while True:
            r = self.text.fast(inp, pos)
            pos = (yield from self.text.run(inp, pos)) if r == SLOW else r
            at = yield from skip_ws(inp, pos)  # whitespace before a call or a fence is theirs
            if self.fenced and inp.startswith(FENCE, at):  # (backticks that open or close nothing are text)
                run, is_fence = yield from self._fence_at(inp, pos, at, pos == start, fence)
                if is_fence:
                    fence = 0 if fence else run
                self._text(inp, pos, at + run)
                pos = at + run
                continue
            hit = yield from _guard_at(inp, at, self.guards)
            if hit is None:
                return pos
            if not fence:
                if at >= decided[0]:
                    inp.pin(pos)  # (the text before the guard is this block's until the decision)
                    try:
                        decided = yield from self._first_stop(inp, at + len(hit))
                    finally:
                        inp.unpin(pos)
                if not decided[1] and (yield from self._is_call(inp, pos, at, hit)):
                    inp.events += [("warning", self.warning), ("deviation", at, self.warning)]
                    return pos
            self._text(inp, pos, at + len(hit))
            pos = at + len(hit)

    def _is_call(self, inp: Input, pos: int, at: int, hit: str) -> Run:
        """Whether a probe whose guard is ``hit`` reads a well-formed call at ``at``."""
        for guards, check in self.probes:
            if hit not in guards:
                continue
            inp.pin(pos)
            try:
                r = check.fast(inp, at)
                if ((yield from check.run(inp, at)) if r == SLOW else r) != FAIL:
                    return True
            finally:
                inp.unpin(pos)
        return False

    def first(self) -> tuple[str, ...] | None:
        return None

    def nullable(self) -> bool:
        return True


def _guard_at(inp: Input, pos: int, guards: Sequence[str]) -> Run:
    """The longest of ``guards`` at ``pos`` (None if none), once the input decides."""
    while True:
        hit, pending = guard_state(inp, pos, guards)
        if not pending or inp.eof:
            return hit
        yield NEED
