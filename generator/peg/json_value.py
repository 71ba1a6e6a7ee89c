"""One JSON value, scanned incrementally, its raw bytes streamed (:class:`JsonValue`)."""

from __future__ import annotations

import json
import re
from typing import Any

from .runtime import FAIL, NEED, SLOW, Input, Parser, Run, _Fast

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
