"""Structures → a parser for one model's output, one-shot or streamed.

The output after the generation prompt is read as a loop of *segments*, each chosen by the
marker it starts with: a reasoning block, wrapped content, a tool-call section, the end of the
turn; text between them is content. Text before and after tool calls therefore stays in
``content``, in order, and several reasoning blocks (interleaved thinking) add up.

Tool calls are read three ways, from the analysis:

* JSON-object formats (``{"name": .., "arguments": ..}`` in any key order and spacing) as a
  JSON object whose fields are routed by name; name-as-key objects likewise;
* every other format through its exact skeleton (literal parts, name, id, arguments);
* arguments as JSON (the model's own bytes are kept), as a Python/dialect value (converted to
  JSON), or as tagged units typed by the tool's schema.

Malformed output never raises (unless ``strict``): invalid JSON arguments keep the call with
the raw text; a segment that breaks before its call has a name becomes content again; either
way ``parse_error`` says where.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any, Callable, Iterable, Mapping, Sequence

from analyzer.errors import ParseError
from analyzer.markers import is_marker, tokenize
from analyzer.structures import (FunctionFormat, Part, ReasoningMode, TemplateAnalysis,
                                 ToolCallStructure, ValueFormat)

from .peg import (FAIL, NEED, SCAN, SLOW, Capture, Choice, Empty, Input, JsonValue, Lit, Marker, Opt, Parser, Repeat,
                  Run, Seq, Session, Until, _Fast, mark, number_cut, rollback)
from .values import LiteralValue, to_json_text, typed_json, unwrap_cdata


# --------------------------------------------------------------------------- grammar pieces

def _marker(text: str) -> Marker:
    return Marker.of(text)


def _stop(text: str) -> Marker:
    """A marker that ends a text region, with the whitespace the template writes before it
    (that whitespace is the template's, not the text's; what follows the core is not looked at)."""
    m = _marker(text)
    return Marker(m.core, m.before)


def _cores(markers: Iterable[Marker]) -> list[Marker]:
    return [m for m in markers if m.core]


class Segments(Parser):
    """The body: guarded segments until the end of input; text between them is ``default``.

    A segment that fails is not fatal: an ``("abort", start, pos, message)`` event reports it;
    if it emitted no text yet, its text becomes content, else parsing resumes where it failed.
    """

    def __init__(self, alternatives: Sequence[tuple[tuple[str, ...], Parser]], stops: Sequence[Marker],
                 tail: str = "") -> None:
        self.alternatives = [(g, p) for g, p in alternatives if g]
        self.choice = Choice(self.alternatives, None)
        self.stops = list(stops)
        self.tail = tail

    def _text(self, stops: Sequence[Marker]) -> Parser:
        return Capture("content", Until(stops, tail=self.tail))

    def run(self, inp: Input, pos: int) -> Run:
        default = self._text(self.stops)
        whole = Choice(self.alternatives, default)  # with all the input at hand: no coroutines
        while True:
            while inp.end <= pos and not inp.eof:
                yield NEED
            if pos >= inp.end and inp.eof:
                return pos
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
            pos = yield from _pinned(inp, start, self._segment(inp, start, n_events, chunks_before, default))

    def _segment(self, inp: Input, pos: int, n_events: int, chunks_before: int, default: Parser) -> Run:
        """One segment from ``pos`` (or the text that stands for it); the position after it."""
        start = pos
        end = yield from self.choice.run(inp, pos)
        if end == FAIL and inp.error_pos == pos and inp.chunks == chunks_before and \
                inp.n_events == n_events:
            end = yield from default.run(inp, pos)  # no segment starts here: plain text
            if end == pos:  # nothing consumed: take one character as text, to progress
                inp.events += [("open", "content"), ("chunk", "content", inp.get(pos, pos + 1)),
                               ("close", "content")]
                end = pos + 1
            return end
        if end != FAIL:
            return end
        fail = max(inp.error_pos, start)
        inp.events.append(("abort", start, fail, inp.error or "unexpected text"))
        resume = start if inp.chunks == chunks_before else fail
        if fail <= resume:
            fail = resume
        # the broken segment's text is content, verbatim, up to where parsing resumes
        upto = max(fail, resume + 1)
        while inp.end < upto and not inp.eof:
            yield NEED
        upto = min(upto, inp.end)
        if upto > resume:
            inp.events += [("open", "content"), ("chunk", "content", inp.get(resume, upto)),
                           ("close", "content")]
        return upto


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


class JsonCall(Parser):
    """A call written as a JSON object: fields routed by name (``name``, ``arguments``, ``id``
    as the template names them), in any order and spacing; other fields are skipped. Invalid
    arguments are kept raw up to ``stops`` (the call's closing markers)."""

    def __init__(self, name_field: str, args_field: str, id_field: str, name_as_key: bool = False,
                 stops: Sequence[Marker] = ()) -> None:
        self.name_field, self.args_field, self.id_field = name_field, args_field, id_field
        self.name_as_key = name_as_key
        self.stops = list(stops) or [Marker("}")]
        self._name = Capture("tool_name", JsonString())
        self._id = Capture("tool_id", JsonString())
        self._args = Capture("tool_args", Recover(JsonValue(), self.stops))
        self._skip_value = JsonValue(tag="")

    def first(self) -> tuple[str, ...]:
        return ("{",)

    def fast(self, inp: Input, pos: int) -> int:
        """A whole, valid object already in the buffer, read with the C decoder; anything else
        (incomplete, broken: recovery decides) goes the streaming way."""
        events: list[tuple] = []
        end = self._fast_object(inp, pos - inp.base, events, [False])
        if end is None:
            return SLOW
        inp.chunk_pos = end + inp.base
        if len(events) in (7, 10) and events[-1] is _JSON_OK and events[0] == _NAME_OPEN and \
                events[1][0] == "chunk" and events[-4] == _ARGS_OPEN and (len(events) == 7 or events[3] == _ID_OPEN):
            # the usual call: name (id) arguments, as one event (the events it stands for kept)
            inp.events.append(("call", events[1][2], events[4][2] if len(events) == 10 else None, events[-3][2],
                               events))
            inp.chunks += len(events) // 3
        else:
            inp.events += events
            inp.chunks += sum(1 for e in events if e[0] == "chunk")
        return end + inp.base

    def _fast_object(self, inp: Input, i: int, events: list[tuple], named: list[bool]) -> int | None:
        text = inp.text
        m = _OPEN.match(text, i)
        if m is None:
            return None
        i = m.end()
        if text.startswith("}", i):
            return i + 1
        while True:
            if not text.startswith('"', i):
                return None
            try:
                key, i = scanstring(text, i + 1)
                m = _COLON.match(text, i)
                if m is None:
                    return None
                i = m.end()
                value, j = SCAN(text, i)
            except (StopIteration, ValueError):
                return None
            if j >= len(text) and not inp.eof:
                return None  # a number may go on
            if number_cut(text, i, j):
                return None
            if self.name_as_key and named[0]:
                events.append(("error", i + inp.base, f"extra key {key!r} in the call object (ignored)"))
            elif self.name_as_key:
                named[0] = True
                events += [("open", "tool_name"), ("chunk", "tool_name", key), ("close", "tool_name"),
                           ("open", "tool_args"), ("chunk", "tool_args", text[i:j]), ("close", "tool_args"),
                           _JSON_OK]
            elif key == self.name_field and named[0]:
                events.append(("error", i + inp.base, f"repeated key {key!r} in the call object (ignored)"))
            elif key == self.name_field or (key == self.id_field and self.id_field):
                tag = "tool_name" if key == self.name_field else "tool_id"
                named[0] = named[0] or tag == "tool_name"
                events += [("open", tag)]
                value = value if isinstance(value, str) else json.dumps(value)
                if value:
                    events.append(("chunk", tag, value))
                events.append(("close", tag))
            elif key == self.args_field:
                events += [("open", "tool_args"), ("chunk", "tool_args", text[i:j]), ("close", "tool_args"),
                           _JSON_OK]
            elif isinstance(value, dict) and not named[0]:
                if self._fast_object(inp, i, events, named) is None:  # a wrapper ({"function": {...}})
                    return None
            m = _NEXT.match(text, j)
            if m is None:
                return None
            if m.group(1) == "}":
                return m.end(1)
            i = m.end()

    def run(self, inp: Input, pos: int) -> Run:
        end = yield from self._object(inp, pos, [False])
        inp.recovered = False
        return end

    def _object(self, inp: Input, pos: int, named: list[bool]) -> Run:
        """The object's fields; a field this call does not name, holding an object, is read the
        same way while no name was found (``{"type": "function", "function": {"name": ...}}``).
        What the buffer already holds is read directly; the rest waits for input."""

        def skip(p: int) -> Run:
            while True:
                p = _skip_now(inp, p)
                if p < inp.end or inp.eof:
                    return p
                yield NEED

        def at(p: int) -> str:
            return inp.text[p - inp.base] if p < inp.end else ""

        def settle(p: int) -> Run:
            """Streaming, the fields before the arguments carry nothing to stream: they are read
            once a bracket comes (the arguments' or the object's), in one go."""
            if inp.eof or not _BRACKETS.isdisjoint(inp.text[p - inp.base:]):
                return
            inp.pin(p)
            inp.fast = _Fast(_BRACKETS, "", inp.end)
            try:
                yield NEED
            finally:
                inp.fast = None
                inp.unpin(p)

        yield from settle(pos)
        pos = yield from skip(pos)
        if at(pos) != "{":
            return inp.fail(pos, "expected '{'")
        pos += 1
        first = True
        while True:
            yield from settle(pos)
            pos = yield from skip(pos)
            if at(pos) == "}":
                return pos + 1
            if not first:
                if at(pos) != ",":
                    return inp.fail(pos, "expected ','")
                pos = yield from skip(pos + 1)
            first = False
            now = _key_now(inp, pos)
            if now is not None:
                key, pos = now
            else:
                key_start = inp.pin(pos)
                try:
                    pos = yield from self._skip_value.run(inp, pos)  # the key (a JSON string), untagged
                finally:
                    inp.unpin(key_start)
                if pos == FAIL:
                    return FAIL
                try:
                    key = json.loads(inp.get(key_start, pos))
                except ValueError:
                    return inp.fail(key_start, "invalid JSON key")
                pos = yield from skip(pos)
                if at(pos) != ":":
                    return inp.fail(pos, "expected ':'")
                pos = yield from skip(pos + 1)
            inp.recovered = False
            value: Parser | None = self._skip_value
            if self.name_as_key and named[0]:
                inp.events.append(("error", pos, f"extra key {key!r} in the call object (ignored)"))
            elif self.name_as_key:
                named[0] = True
                inp.events += [("open", "tool_name"), ("chunk", "tool_name", key), ("close", "tool_name")]
                value = self._args
            elif key == self.name_field and named[0]:
                inp.events.append(("error", pos, f"repeated key {key!r} in the call object (ignored)"))
            elif key == self.name_field:
                named[0] = True
                value = self._name
            elif key == self.args_field:
                value = self._args
            elif key == self.id_field and self.id_field:
                value = self._id
            elif not named[0] and at(pos) == "{":
                value = None
                pos = yield from self._object(inp, pos, named)
            if value is not None:
                r = value.fast(inp, pos)
                pos = (yield from value.run(inp, pos)) if r == SLOW else r
            if pos == FAIL:
                return FAIL
            if inp.recovered:  # the object is broken: the call ends where its raw arguments end
                p = yield from skip(pos)
                if (yield from _peek(inp, p, "}")):  # with the object's own closing brace
                    return p + 1
                return pos


_BRACKETS = frozenset("{}[]")


def _string_now(text: str, i: int) -> tuple[str, int] | None:
    """A valid JSON string starting at ``i`` and complete in ``text``: (its value, its end)."""
    if not text.startswith('"', i) or text.find('"', i + 1) < 0:
        return None
    try:
        return scanstring(text, i + 1)
    except ValueError:
        return None


def _key_now(inp: Input, pos: int) -> tuple[str, int] | None:
    """A key and its colon already in the buffer: (key, position after the colon and spaces)."""
    text = inp.text
    key = _string_now(text, pos - inp.base)
    m = _COLON.match(text, key[1]) if key is not None else None
    if m is None or m.end() >= len(text) and not inp.eof:
        return None
    return key[0], m.end() + inp.base


def _skip_now(inp: Input, pos: int) -> int:
    """Past the whitespace the buffer holds at ``pos``."""
    i = pos - inp.base
    text = inp.text
    if i < len(text) and text[i] in " \t\r\n":
        i = _WS.match(text, i).end()
    return i + inp.base


_WS = re.compile(r"[ \t\r\n]*")
_JSON_OK = ("json_ok",)  # the arguments just closed were decoded whole: valid JSON
_NAME_OPEN, _ID_OPEN, _ARGS_OPEN = ("open", "tool_name"), ("open", "tool_id"), ("open", "tool_args")
_OPEN = re.compile(r"[ \t\r\n]*\{[ \t\r\n]*")
_COLON = re.compile(r"[ \t\r\n]*:[ \t\r\n]*")
_NEXT = re.compile(r"[ \t\r\n]*([,}])[ \t\r\n]*")


def _peek(inp: Input, pos: int, s: str) -> Run:
    while inp.end - pos < len(s) and not inp.eof:
        yield NEED
    return inp.startswith(s, pos)


class JsonString(Parser):
    """A JSON string value; its decoded text is the region's text (a bare value is taken as is)."""

    def fast(self, inp: Input, pos: int) -> int:
        found = _string_now(inp.text, pos - inp.base)
        if found is None:
            return SLOW
        inp.emit(inp.tag(None), found[0], found[1] + inp.base)
        return found[1] + inp.base

    def run(self, inp: Input, pos: int) -> Run:
        start = inp.pin(pos)
        try:
            end = yield from JsonValue(tag="").run(inp, pos)
        finally:
            inp.unpin(start)
        if end == FAIL:
            return FAIL
        raw = inp.get(start, end)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        inp.emit(inp.tag(None), value if isinstance(value, str) else json.dumps(value), end)
        return end

    def first(self) -> tuple[str, ...]:
        return ('"',)


# --------------------------------------------------------------------------- skeleton calls

def _first_literal(parts: Sequence[Part]) -> str:
    for p in parts:
        if p.kind == "lit" and p.text.strip():
            return p.text
        if p.kind != "lit":
            return ""
    return ""


def _follow(parts: Sequence[Part], i: int, after: Sequence[str], ts: ToolCallStructure | None = None
            ) -> list[Marker]:
    """Markers that can come right after part ``i``: the next literal, else what follows.
    Tagged arguments start with their unit's first literal, and may be absent."""
    out: list[Marker] = []
    ws = ""  # whitespace-only literals on the way belong in front of the next marker

    def lead(text: str) -> Marker:
        m = _marker(ws + text)
        return m

    for p in parts[i + 1:]:
        if p.kind == "lit" and p.text.strip():
            return out + [lead(p.text)]
        if p.kind == "lit":
            ws += p.text
            continue
        if p.kind == "typed":
            return out + [lead(t) for _, t in p.by_type if t.strip()]
        if p.kind == "args" and ts is not None and ts.args_mode == "tagged":
            first = _first_literal(ts.arg_parts)
            if first.strip():
                out.append(lead(first))
            if ts.args_empty and ts.args_empty.strip():
                out.append(lead(ts.args_empty))
            continue  # no arguments: whatever follows them
        if ws and not out:
            return [Marker.of(ws)]  # only whitespace separates this part from the next value
        return out
    return out + [lead(a) for a in after if a.strip()]


def _typed_choice(part: Part, tag: str | None) -> Parser:
    texts = sorted({t for _, t in part.by_type if t}, key=len, reverse=True)
    alts = [((t,), Capture(tag, Lit(t)) if tag else Lit(t)) for t in texts]
    return Choice(alts, Empty())


class _TaggedArgs:
    def __init__(self, ts: ToolCallStructure, after: Sequence[str]) -> None:
        self.ts = ts
        self.after = list(after)

    def unit(self) -> Parser:
        parts = list(self.ts.arg_parts)
        seq: list[Parser] = []
        seen_key = False
        for i, p in enumerate(parts):
            stops = _follow(parts, i, ([self.ts.arg_separator] if self.ts.arg_separator.strip() else [])
                            + self.after)
            if p.kind == "lit":
                seq.append(_marker(p.text) if p.text.strip() else Lit(p.text))
            elif p.kind == "key":
                seq.append(Capture("arg_key", Until(stops, to_end=False)) if not seen_key
                           else Until(stops, tag="", to_end=False))
                seen_key = True
            elif p.kind == "typed":
                seq.append(_typed_choice(p, "arg_type"))
            elif p.kind == "value":
                fmt = dict(self.ts.value_formats).get("string")
                if fmt is not None and not fmt.raw_strings:
                    seq.append(Capture("arg_literal", LiteralValue(fmt)))
                else:
                    seq.append(Capture("arg_value", Until(stops, to_end=True)))
        return Seq(*seq)

    def parser(self) -> Parser:
        unit = self.unit()
        sep = (_marker(self.ts.arg_separator) if self.ts.arg_separator.strip() else Lit(self.ts.arg_separator)) \
            if self.ts.arg_separator else None
        closers = tuple(g for a in self.after if a.strip() for g in _marker(a).first() if g)
        body = Repeat(unit, sep, min=0, closers=closers)
        if self.ts.args_empty:
            return Choice([((self.ts.args_empty,), Lit(self.ts.args_empty))], body)
        return body


def _args_parser(ts: ToolCallStructure, after: list[Marker]) -> Parser:
    if ts.args_mode == "tagged":
        return _TaggedArgs(ts, [m.before + m.core + m.after for m in after]).parser()
    fmt = ts.args_format
    if fmt.kind == "json":
        return Capture("tool_args", Recover(JsonValue(), after))
    return Capture("args_literal", Recover(LiteralValue(fmt), after))


def _skeleton_call(ts: ToolCallStructure) -> Parser:
    parts = list(ts.call_parts)
    closers = [ts.call_separator, ts.tool_section_end]
    seq: list[Parser] = []
    args_at = next((i for i, p in enumerate(parts) if p.kind == "args"), len(parts))
    # name <marker> id <marker>: the id and its marker may be missing (models write ids or not)
    optional_id = {i for i in range(1, len(parts) - 2)
                   if parts[i - 1].kind == "name" and parts[i].kind == "lit" and parts[i + 1].kind == "id"
                   and parts[i + 2].kind == "lit" and parts[i].text.strip() and parts[i + 2].text.strip()
                   and _marker(parts[i].text).core != _marker(parts[i + 2].text).core}
    skip = -1
    for i, p in enumerate(parts):
        if i == skip:
            continue
        stops = _follow(parts, i, closers, ts)
        if i + 1 in optional_id:  # the name also ends where the arguments' marker begins
            stops = stops + [_marker(parts[i + 3].text)]
        if i in optional_id:
            m = _marker(p.text)
            seq.append(Opt(Seq(m, Capture("tool_id", Until(_follow(parts, i + 1, closers, ts), to_end=False))),
                           tuple(g for g in m.first() if g)))
            skip = i + 1
            continue
        if p.kind == "lit":
            if i > args_at and p.text.strip():
                seq.append(Closer(_marker(p.text)))
            else:
                seq.append(_marker(p.text) if p.text.strip() else Lit(p.text))
        elif p.kind == "name":
            if any(q.kind == "name" for q in parts[:i]):
                seq.append(Until(stops, tag="", to_end=False))  # the name again (a recipient header)
            else:
                seq.append(Capture("tool_name", Until(stops, to_end=False)))
        elif p.kind == "id":
            seq.append(Capture("tool_id", Until(stops, to_end=False)))
        elif p.kind == "index":
            seq.append(Until(stops, tag="", to_end=False))
        elif p.kind == "args":
            seq.append(_args_parser(ts, stops))
        elif p.kind == "typed":
            seq.append(_typed_choice(p, None))
    return Capture("tool_call", Seq(*seq), where=True)


def _json_frame(ts: ToolCallStructure) -> tuple[str, str] | None:
    """The literal text before the call's JSON object and after it (``<tool_call>\n`` ...
    ``\n</tool_call>``), or None when the call is not one JSON object between literals."""
    parts = ts.call_parts
    if not parts or parts[0].kind != "lit" or parts[-1].kind != "lit":
        return None
    first, last = parts[0].text, parts[-1].text
    k, j = first.find("{"), last.find("}")
    if k < 0 or j < 0:
        return None
    return first[:k], last[j + 1:]


def _around(text: str) -> Parser:
    return Empty() if not text.strip() else _marker(text)


def _call_parser(ts: ToolCallStructure) -> Parser:
    frame = _json_frame(ts)
    if frame is not None and ts.function_format in (FunctionFormat.JSON_OBJECT, FunctionFormat.NAME_AS_KEY):
        # broken arguments run up to the call's own closing brace and what follows it
        closing = ["}" + frame[1]] if frame[1].strip() else []
        stops = [_marker(x) for x in (*closing, frame[1], ts.call_separator, ts.tool_section_end) if x.strip()]
        inner = (JsonCall(ts.name_field, ts.args_field, ts.id_field, stops=stops)
                 if ts.function_format == FunctionFormat.JSON_OBJECT
                 else JsonCall("", "", "", name_as_key=True, stops=stops))
        after = Closer(_marker(frame[1])) if frame[1].strip() else Empty()
        return Capture("tool_call", Seq(_around(frame[0]), inner, after), where=True)
    return _skeleton_call(ts)


def channel_parts(ts: ToolCallStructure) -> tuple[str, str, str, str] | None:
    """For channel formats, ``(recipient, channel_marker, header_end, close)``: the literal
    before the name (``to=functions.``), the first marker after it (``<|channel|>``), the marker
    that ends the header (``<|message|>``) and what closes the call. Header attributes form an
    unordered set (models write ``<|channel|>x to=functions.f <|constrain|>json<|message|>``
    where a template writes `` to=functions.f<|channel|>x json<|message|>``)."""
    if ts.function_format != FunctionFormat.CHANNEL_BASED:
        return None
    parts = list(ts.call_parts)
    kinds = [p.kind for p in parts]
    if kinds[:4] != ["lit", "name", "lit", "args"] and kinds[1:5] != ["lit", "name", "lit", "args"]:
        return None
    i = kinds.index("name")
    recipient = parts[i - 1].text.strip()
    toks = [t for t in tokenize(parts[i + 1].text) if is_marker(t)]
    if not recipient or len(toks) < 2:
        return None
    close = parts[kinds.index("args") + 1].text if kinds.index("args") + 1 < len(parts) else ""
    return recipient, toks[0], toks[-1], close


class ChannelHeader(Parser):
    """A call header in any attribute order: the text up to ``end``, in which ``recipient``
    followed by the function name must occur."""

    def __init__(self, recipient: str, end: str) -> None:
        self.recipient, self.end = recipient, end

    def run(self, inp: Input, pos: int) -> Run:
        while True:
            j = inp.find(self.end, pos)
            if j >= 0:
                break
            if inp.eof:
                return inp.fail(pos, f"expected {self.end!r}")
            yield NEED
        header = inp.get(pos, j)
        k = header.find(self.recipient)
        if k < 0:
            return inp.fail(pos, f"no {self.recipient!r} in the header")
        import re as _re
        m = _re.match(r"[A-Za-z0-9_.\-]+", header[k + len(self.recipient):])
        if not m:
            return inp.fail(pos + k, "no function name after the recipient")
        inp.events += [("open", "tool_name"), ("chunk", "tool_name", m.group(0)), ("close", "tool_name")]
        inp.chunks += 1
        return j + len(self.end)


def _channel_call(ts: ToolCallStructure, parts: tuple[str, str, str, str]) -> Parser:
    recipient, channel, end, close = parts
    args = _args_parser(ts, [_marker(close)] if close.strip() else [])
    after = Closer(_marker(close)) if close.strip() else Empty()
    return Capture("tool_call", Seq(Lit(channel), ChannelHeader(recipient, end), args, after), where=True)


def tool_guards(ts: ToolCallStructure) -> tuple[str, ...]:
    """Literals that start a tool section (section start, else the call's first literal)."""
    if ts.tool_section_start.strip():
        return _marker(ts.tool_section_start).first()
    frame = _json_frame(ts)
    if frame is not None and ts.function_format in (FunctionFormat.JSON_OBJECT, FunctionFormat.NAME_AS_KEY):
        if frame[0].strip():
            return tuple(g for g in _marker(frame[0]).first() if g)
        # a bare JSON object: decided by its opening and first key, as the template writes them
        return (ts.call_parts[0].text.strip(),) if ts.call_parts[0].text.strip() else ()
    lit = _first_literal(ts.call_parts)
    return tuple(g for g in _marker(lit).first() if g) if lit else ()


def tool_section(ts: ToolCallStructure, parallel: bool) -> Parser:
    call = _call_parser(ts)
    if ts.call_separator.strip() or ts.call_separator:
        sep = _marker(ts.call_separator) if ts.call_separator.strip() else Lit(ts.call_separator)
    else:
        sep = None
    closers = tuple(g for x in (ts.tool_section_end,) if x.strip() for g in _marker(x).first() if g)
    json_calls = _json_frame(ts) is not None and ts.function_format in (FunctionFormat.JSON_OBJECT,
                                                                         FunctionFormat.NAME_AS_KEY)
    calls = Repeat(call, sep, min=1, max=None if parallel else 1, closers=closers,
                   skip_ws=json_calls and not _json_frame(ts)[0].strip())
    pieces: list[Parser] = []
    if ts.tool_section_start.strip():
        pieces.append(_marker(ts.tool_section_start))
    pieces.append(calls)
    if ts.tool_section_end.strip() and not _turn_end_like(ts):
        end = _marker(ts.tool_section_end)
        pieces.append(Opt(end, tuple(g for g in end.first() if g)))  # may be cut off with the stop token
    return Seq(*pieces)


# --------------------------------------------------------------------------- whole message

@dataclass(frozen=True)
class GrammarPlan:
    """What the message grammar was built from (kept for reports and the GBNF emitter)."""

    reasoning_mode: ReasoningMode
    reasoning_start: str
    reasoning_end: str
    content_start: str
    content_end: str
    end_of_turn: str
    tools: bool
    parallel: bool


def turn_stop_markers(analysis: TemplateAnalysis) -> set[str]:
    """The markers a model stops at: the last token of the end of turn and of the final suffix,
    when it is a marker (``<|END_OF_TURN_TOKEN|>`` of ``<|END_RESPONSE|><|END_OF_TURN_TOKEN|>``;
    none for ``<|close|>message``, whose ``<|close|>`` closes other blocks too)."""
    out = set()
    for text in (analysis.end_of_turn, analysis.final_suffix):
        toks = tokenize(text.strip())
        if toks and is_marker(toks[-1]):
            out.add(toks[-1])
    return out


def split_turn_end(analysis: TemplateAnalysis) -> tuple[TemplateAnalysis, str]:
    r"""(the analysis with its tool section end cut before an end-of-turn marker the end holds,
    the cut-off rest).

    Some templates close the section and the turn in one piece (``\n]\n</tool_call></s>\n``).
    The model stops at that marker, which is often its end-of-sequence token: a server strips it
    from the output, and a grammar cannot match it. So it belongs to the turn, and only the
    part before it closes the section. Example::

        >>> from dataclasses import replace
        >>> from analyzer import analyze_template
        >>> a = analyze_template("templates/chatml-think.jinja")
        >>> ts = replace(a.tool_call_structure, tool_section_end="]</tool_call><|im_end|>\n")
        >>> cut, rest = split_turn_end(replace(a, tool_call_structure=ts))
        >>> cut.tool_call_structure.tool_section_end, rest
        (']</tool_call>', '<|im_end|>\n')
    """
    from dataclasses import replace

    ts = analysis.tool_call_structure
    stops = turn_stop_markers(analysis)
    toks = tokenize(ts.tool_section_end)
    cut = next((i for i, t in enumerate(toks) if t in stops), None)
    if cut is None:
        return analysis, ""
    end = "".join(toks[:cut])
    ts = replace(ts, tool_section_end=end if end.strip() else "")
    return replace(analysis, tool_call_structure=ts), "".join(toks[cut:])


def build_message_grammar(analysis: TemplateAnalysis, *, mode: ReasoningMode, tools_enabled: bool,
                          parallel: bool) -> Parser:
    analysis, turn_end = split_turn_end(analysis)
    cs = analysis.content_structure
    ts = analysis.tool_call_structure
    alts: list[tuple[tuple[str, ...], Parser]] = []
    stops: list[Marker] = []
    end_m = _marker(cs.reasoning_end) if cs.reasoning_end.strip() else None
    # reasoning runs to its end marker, or to the end of the turn when the model never closes it
    turn_ends = [_stop(x) for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
    reasoning_body = Capture("reasoning", Until(([end_m] if end_m else []) +
                                                [m for m in turn_ends if not end_m or m.core != end_m.core]))
    after_reasoning: Parser = Opt(end_m, tuple(g for g in end_m.first() if g)) if end_m else Empty()
    if cs.reasoning_start.strip() and end_m is not None and mode != ReasoningMode.NONE:
        start_m = _marker(cs.reasoning_start)
        guards = tuple(g for g in start_m.first() if g)
        alts.append((guards, Seq(start_m, reasoning_body, after_reasoning)))
        stops.append(start_m)
    if end_m is not None and end_m.core != cs.reasoning_start.strip():
        # a lone end marker: the empty block some templates write (``</think>`` alone), or a
        # stray close after an answer without reasoning; a control marker, not text
        alts.append(((end_m.core,), end_m))
        stops.append(Marker(end_m.core))
    if cs.content_start.strip():
        cstart = _marker(cs.content_start)
        cend = _marker(cs.content_end) if cs.content_end.strip() else None
        ends = [x for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
        inner_stops = ([cend] if cend else []) + _tool_stops(ts, tools_enabled) + \
            [_stop(x) for x in ends]
        body = Capture("content", Until(inner_stops))
        seq = [cstart, body] + ([Opt(cend, tuple(g for g in cend.first() if g))] if cend else [])
        alts.append((tuple(g for g in cstart.first() if g), Seq(*seq)))
        stops.append(cstart)
    if tools_enabled and ts.supports_tools and ts.call_parts:
        guards = tool_guards(ts)
        if guards:
            sep = _separator_ws(ts)
            section = tool_section(ts, parallel)
            if sep:  # the separator before the calls is theirs, not the content's
                guards = tuple(dict.fromkeys(x for g in guards for x in Marker(g, sep).first()))
                section = Seq(Marker("", sep), section)
            alts.append((guards, section))
            stops += [Marker(g, _separator_ws(ts)) for g in guards if g.strip() == g]
        channel = channel_parts(ts)
        if channel is not None:  # the same call with its header attributes in another order
            alts.append(((channel[1],), _channel_call(ts, channel)))
            stops.append(Marker(channel[1]))
    ends = [analysis.end_of_turn] + ([turn_end] if tools_enabled and turn_end else [])
    if tools_enabled and ts.supports_tools and _turn_end_like(ts):
        ends.append(ts.tool_section_end)  # ends a tool-call turn; may follow content written after calls
    final = analysis.final_suffix
    end_markers: dict[str, Marker] = {}
    for end in ends + ([final] if final.strip() else []):
        if end.strip():
            m = _marker(end)
            prev = end_markers.get(m.core)
            if prev is not None:  # the same marker: it takes the whitespace either writes around it
                m = Marker(m.core, max(prev.before, m.before, key=len), max(prev.after, m.after, key=len))
            end_markers[m.core] = m
    for core, eot_m in end_markers.items():
        if not any(_marker(e).core == core for e in ends if e.strip()):  # the final suffix alone
            if core in [m.core for m in stops]:
                continue
            # only at the very end: text the template writes after the last message (an EOS token)
            alts.append((eot_m.first(), Seq(eot_m, AtEnd())))
        else:
            alts.append((eot_m.first(), eot_m))  # the stop token, if the server left it in: dropped
        stops.append(Marker(eot_m.core, eot_m.before))
    if tools_enabled and ts.function_format == FunctionFormat.RECIPIENT_BASED and ts.call_separator.strip():
        return _recipient_grammar(analysis, stops)
    blank_end = analysis.end_of_turn if analysis.end_of_turn and not analysis.end_of_turn.strip() else ""
    body = Segments(alts, stops, tail=blank_end)
    if mode == ReasoningMode.FORCED_OPEN and end_m is not None:
        return Seq(reasoning_body, after_reasoning, body)
    if analysis.message_prefix:  # whitespace the template writes first: the turn's, not content
        return Seq(Marker("", analysis.message_prefix), body)
    return body


def _recipient_grammar(analysis: TemplateAnalysis, stops: list[Marker]) -> Parser:
    """Recipient-based turns (``>>>all\n...``, ``>>>get_weather\n{...}``): every message is
    addressed; the content's recipient is the content opener the analysis found, any other
    recipient is a function. The prompt writes the first delimiter."""
    ts, cs = analysis.tool_call_structure, analysis.content_structure
    delim = _marker(ts.call_separator)
    ends = [_stop(x) for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
    text_stops = [Marker(delim.core)] + ends
    content = Seq(Lit(cs.content_start), Capture("content", Until(text_stops))) if cs.content_start else None
    call = _skeleton_call(ts)
    item = Choice([((cs.content_start,), content)], call) if content is not None else call
    eot = Opt(ends[0]) if ends else Empty()
    return Seq(Repeat(item, delim, min=1, closers=tuple(m.core for m in ends)), eot)


def _turn_end_like(ts: ToolCallStructure) -> bool:
    """A section end that closes nothing the section opened (``<|tool_response>``, ``<|eom_id|>``)
    marks the end of a tool-call turn rather than of the section."""
    from analyzer.markers import pairs, tokenize, is_marker
    end = [t for t in tokenize(ts.tool_section_end) if is_marker(t)]
    start = [t for t in tokenize(ts.tool_section_start) if is_marker(t)]
    return bool(end) and not any(pairs(a, b) for a in start for b in end)


def _tool_stops(ts: ToolCallStructure, enabled: bool) -> list[Marker]:
    if not (enabled and ts.supports_tools and ts.call_parts):
        return []
    return [Marker(g, _separator_ws(ts)) for g in tool_guards(ts) if g and g.strip() == g]


def _separator_ws(ts: ToolCallStructure) -> str:
    """The whitespace a template writes between content and the calls: it belongs to the calls
    (content parsed back renders the same turn)."""
    sep = ts.content_separator
    if sep and not sep.strip():
        return sep
    src = ts.tool_section_start if ts.tool_section_start.strip() else (_first_literal(ts.call_parts) or "")
    return _marker(src).before if src.strip() else ""


# --------------------------------------------------------------------------- events → message

FIELD = {"reasoning": "reasoning_content", "content": "content"}


class _Call:
    """One call being assembled (a plain slotted class: one is made per call, in the hot path)."""

    __slots__ = ("index", "name", "id", "args", "announced", "pending", "json_ok", "n_args", "key",
                 "value_parts", "value_streaming", "arg_type", "literal", "args_literal", "errors", "start",
                 "chunked")

    def __init__(self, index: int, start: int) -> None:
        self.index = index
        self.start = start  # where the call starts in the output
        self.chunked = False  # it read some text (a broken call's text is then not content yet)
        self.name = ""
        self.id: str | None = None
        self.args: list[str] = []
        self.announced = False
        self.pending: list[str] = []  # argument deltas before the name is known
        self.json_ok = False  # the arguments were read by the JSON decoder whole (no need to check)
        # tagged arguments
        self.n_args = 0
        self.key = ""
        self.value_parts: list[str] = []
        self.value_streaming = False
        self.arg_type = ""
        self.literal: list[str] = []
        self.args_literal: list[str] = []
        self.errors: list[str] = []


class TextBuffer:
    """Appended text in compact pieces: a stream of 4-character chunks costs about one byte per
    character, not one str object per chunk."""

    __slots__ = ("parts", "tail")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.tail: list[str] = []

    def write(self, text: str) -> None:
        self.tail.append(text)
        if len(self.tail) >= 256:
            self.compact()

    def compact(self) -> None:
        """The pieces appended so far as one (``tail`` stays the same list)."""
        self.parts.append("".join(self.tail))
        self.tail.clear()

    def getvalue(self) -> str:
        return "".join(self.parts) + "".join(self.tail)


class Assembler:
    """Turns runtime events into the message and into region events (seed 004 model), each of
    which also reads as an OpenAI-style delta (:func:`as_delta`)."""

    def __init__(self, ts: ToolCallStructure, tools: Mapping[str, Mapping[str, Any]] | None) -> None:
        self.ts = ts
        self.tools = dict(tools or {})
        self.text: dict[str, TextBuffer] = {"reasoning_content": TextBuffer(), "content": TextBuffer()}
        self.calls: list[_Call] = []
        self.current: _Call | None = None
        self.open: str | None = None
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self._name: list[str] = []
        self._id: list[str] = []
        self._in: str | None = None  # tag of the tool sub-region being read
        self.quiet = False  # build the message only (one-shot parsing): no region events
        # the output's text between two absolute positions, while it is still at hand (None if not)
        self.raw: Callable[[int, int], str | None] | None = None
        kinds = [p.kind for p in ts.call_parts]
        self._name_part = "name" in kinds
        # the id comes between the name and the arguments: a call is announced with it
        self._id_follows_name = "name" in kinds and "id" in kinds and \
            kinds.index("name") < kinds.index("id") < (kinds.index("args") if "args" in kinds else len(kinds))
        # a call is announced once its name is read, unless an id may still come (a JSON object
        # may write it after the arguments)
        self._id_may_follow = self._id_follows_name or (ts.function_format == FunctionFormat.JSON_OBJECT
                                                        and bool(ts.id_field))

    # ---- output events
    def _region(self, kind: str, fld: str, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "field": fld, **extra}

    def handle(self, events: Iterable[tuple], out: list[dict[str, Any]]) -> None:
        for ev in events:
            kind = ev[0]
            if kind == "chunk":
                self._chunk(ev[1], ev[2], out)
            elif kind == "open":
                if ev[1] == "tool_call":  # ("open", "tool_call", where it starts)
                    self.current = _Call(len(self.calls), ev[2])
                else:
                    self._open(ev[1], out)
            elif kind == "close":
                if ev[1] == "tool_call":  # ("close", "tool_call", where it ends or broke, whether whole)
                    self._close_call(ev[2], ev[3], out)
                else:
                    self._close(ev[1], out)
            elif kind == "call":  # a whole call read at once: (name, id, arguments, its events)
                call = self.current
                if not self.quiet or call is None:
                    self.handle(ev[4], out)
                    continue
                self._whole_call(call, ev[1], ev[2], ev[3])
            elif kind == "json_ok":
                if self.current is not None:
                    self.current.json_ok = True
            elif kind == "abort":
                _, start, pos, msg = ev
                self.errors.append({"position": pos, "message": msg, "segment_start": start})
                if self.current is not None and not self.current.name:
                    self._unnamed(self.current, out)
                    self.current = None
            elif kind == "error":
                _, pos, msg = ev
                self.errors.append({"position": pos, "message": msg})
                if self.current is not None:
                    self.current.errors.append(msg)

    def _whole_call(self, call: _Call, name: str, call_id: str | None, args: str) -> None:
        """A call read whole, for the message only (one-shot): what closing its name, id and
        arguments in turn does, without region events."""
        self._set_name(call, name)
        if call_id:
            call.id = call_id
            if not self._name_part:
                call.name = self._name_from_id(call_id)
        call.args.append(args)
        call.json_ok = True
        if call.name:
            call.announced = True
            call.pending = []

    def _set_name(self, call: _Call, name: str) -> None:
        call.name = name = name.strip()
        if self.tools and name and name not in self.tools:
            self.warnings.append(f"call to unknown tool {name!r}")

    def _open(self, tag: str, out: list[dict[str, Any]]) -> None:
        if tag in FIELD:
            if not self.quiet:
                out.append(self._region("region_open", FIELD[tag]))
        elif tag in ("tool_name", "tool_id", "arg_key", "arg_value", "arg_literal", "args_literal", "arg_type",
                     "tool_args"):
            self._in = tag
            if tag == "tool_name":
                self._name = []
            elif tag == "tool_id":
                self._id = []
            elif tag == "arg_key" and self.current is not None:
                self.current.key = ""
            elif tag in ("arg_value", "arg_literal") and self.current is not None:
                self.current.value_parts, self.current.literal = [], []
                self.current.value_streaming = False

    def _emit_args(self, call: _Call, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        call.args.append(text)
        if call.announced:
            if not self.quiet:  # (a literal: this is the streaming path of every argument chunk)
                out.append({"type": "region_chunk", "field": "tool_calls", "index": call.index, "text": text,
                            "dirty": False})
        else:
            call.pending.append(text)

    def _announce(self, call: _Call, out: list[dict[str, Any]]) -> None:
        if call.announced or not call.name:
            return
        call.announced = True
        extra = {"index": call.index, "name": call.name}
        if call.id is not None:
            extra["id"] = call.id
        if not self.quiet:
            out.append(self._region("region_open", "tool_calls", **extra))
        for text in call.pending:
            if not self.quiet:
                out.append(self._region("region_chunk", "tool_calls", index=call.index, text=text, dirty=False))
        call.pending = []

    def _param_schema(self, call: _Call) -> dict[str, Any] | None:
        tool = self.tools.get(call.name) or {}
        props = (tool.get("parameters") or {}).get("properties") or {}
        return props.get(call.key)

    def _chunk(self, tag: str, text: str, out: list[dict[str, Any]]) -> None:
        if tag in FIELD:
            self.text[FIELD[tag]].write(text)
            if not self.quiet:
                out.append(self._region("region_chunk", FIELD[tag], text=text, dirty=False))
            return
        call = self.current
        if call is None:
            return
        call.chunked = True
        if tag == "tool_args":
            self._emit_args(call, text, out)
        elif tag == "tool_name":
            self._name.append(text)
        elif tag == "tool_id":
            self._id.append(text)
        elif tag == "args_literal":
            call.args_literal.append(text)
        elif tag == "arg_key":
            call.key += text
        elif tag == "arg_type":
            call.arg_type = text
        elif tag == "arg_literal":
            call.literal.append(text)
        elif tag == "arg_value":
            if self._string_typed(call):
                if not call.value_streaming:
                    call.value_streaming = True
                    self._emit_args(call, '"', out)
                self._emit_args(call, json.dumps(text, ensure_ascii=False)[1:-1], out)
            else:
                call.value_parts.append(text)

    def _string_typed(self, call: _Call) -> bool:
        """A raw tagged value streams as a JSON string when its schema (or, without one, its
        typed marker) says string: the text is final as it arrives. (Not for formats that may
        wrap values in CDATA: those are read whole and unwrapped.)"""
        if any(f.cdata_chars for _, f in self.ts.value_formats):
            return False
        schema = self._param_schema(call)
        from .values import schema_type
        t = schema_type(schema)
        if t is not None:
            return t == "string"
        if call.arg_type:
            for jtype, text in self._typed_texts():
                if text == call.arg_type:
                    return jtype == "string"
        return schema is None and not self.tools.get(call.name)

    def _typed_texts(self) -> list[tuple[str, str]]:
        return [bt for p in self.ts.arg_parts if p.kind == "typed" for bt in p.by_type]

    def _close(self, tag: str, out: list[dict[str, Any]]) -> None:
        if tag in FIELD:
            value = self.text[FIELD[tag]].getvalue()
            if not self.quiet:
                out.append(self._region("region_close", FIELD[tag], value=value))
            return
        call = self.current
        if call is None:
            return
        if tag == "tool_name":
            self._set_name(call, "".join(self._name))
            if call.args or call.id is not None or not self._id_may_follow:
                self._announce(call, out)
        elif tag == "tool_id":
            call.id = "".join(self._id) or None
            if call.id is None:
                return
            if not self._name_part:
                call.name = self._name_from_id(call.id)  # the id is where the name is written
                self._announce(call, out)
            elif call.announced and not self.quiet:  # an id written after the arguments began
                out.append(self._region("region_update", "tool_calls", index=call.index, id=call.id))
            elif call.name:
                self._announce(call, out)
        elif tag == "tool_args":
            self._announce(call, out)
        elif tag == "args_literal":
            text = "".join(call.args_literal)
            try:
                converted = to_json_text(text, self.ts.args_format)
            except (ValueError, SyntaxError) as e:
                converted = text
                call.errors.append(f"arguments not readable: {e}")
                self.errors.append({"position": -1, "message": f"arguments of {call.name!r} not readable (kept raw)"})
            self._announce(call, out)
            self._emit_args(call, converted, out)
        elif tag == "arg_key":
            self._announce(call, out)
            self._emit_args(call, ("{" if call.n_args == 0 else ", ") + json.dumps(call.key.strip(),
                                                                                ensure_ascii=False) + ": ", out)
            call.n_args += 1
        elif tag in ("arg_value", "arg_literal"):
            if tag == "arg_value" and call.value_streaming:
                self._emit_args(call, '"', out)
            elif tag == "arg_value":
                raw = unwrap_cdata("".join(call.value_parts))
                self._emit_args(call, typed_json(raw, self._param_schema(call), self._value_format()), out)
            else:
                raw = "".join(call.literal)
                try:
                    text = to_json_text(raw, dict(self.ts.value_formats).get("string") or ValueFormat())
                except (ValueError, SyntaxError):
                    text = typed_json(raw, self._param_schema(call))
                self._emit_args(call, text, out)
            call.arg_type = ""

    def _close_call(self, end: int, whole: bool, out: list[dict[str, Any]]) -> None:
        """The end of a call: ``end`` is where it ends (``whole``) or where it broke."""
        call = self.current
        if call is not None and not call.name and call.id:
            call.name = self._name_from_id(call.id)
        if call is not None and call.name:
            self._finish_call(call, out)
            self.calls.append(call)
        elif call is not None:
            self._unnamed(call, out, end, whole)
        self.current = None

    def _unnamed(self, call: _Call, out: list[dict[str, Any]], end: int = -1, whole: bool = False) -> None:
        """A call that never got a name was never shown: its text stays, as content. Verbatim
        when the output still holds it (``raw``): the whole call, or up to where it broke when it
        read some text (else the broken segment's text is content already); else what it read."""
        raw = None
        if self.raw is not None and call.start < end and (whole or call.chunked):
            raw = self.raw(call.start, end)
        text = raw if raw is not None else "".join(call.args)
        if text:
            self.errors.append({"position": call.start if raw is not None else -1,
                                "message": "a tool call without a name (kept as content)"})
            self._open("content", out)
            self._chunk("content", text, out)
            self._close("content", out)
        call.args = []

    def _name_from_id(self, call_id: str) -> str:
        """The function name inside an id that carries it (``functions.get_weather:0``): the
        longest known tool name it contains, else the id without a namespace and an index."""
        known = [n for n in self.tools if n in call_id]
        if known:
            return max(known, key=len)
        import re as _re
        return _re.sub(r"[:_-]\d+$", "", call_id).rsplit(".", 1)[-1]

    def _value_format(self) -> ValueFormat | None:
        return dict(self.ts.value_formats).get("object")

    def _finish_call(self, call: _Call, out: list[dict[str, Any]]) -> None:
        self._announce(call, out)
        if self.ts.args_mode == "tagged" or not call.args:
            if call.n_args:
                self._emit_args(call, "}", out)
            elif not call.args:
                self._emit_args(call, "{}", out)
        args = "".join(call.args)
        ok = call.json_ok and len(call.args) == 1
        call.args = [args]  # one string per finished call
        try:
            if not ok:
                json.loads(args)
        except ValueError:
            if not call.errors:
                self.errors.append({"position": -1, "message": f"arguments of {call.name!r} are not valid JSON "
                                                               "(kept as the model wrote them)"})
        if not self.quiet:
            out.append(self._region("region_close", "tool_calls", index=call.index, value=self._call_dict(call)))

    def _call_dict(self, call: _Call) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "function", "function": {"name": call.name, "arguments": "".join(call.args)}}
        if call.id is not None:
            d = {"id": call.id, **d}
        return d

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant",
                               "content": self.text["content"].getvalue() or None,
                               "reasoning_content": self.text["reasoning_content"].getvalue() or None}
        if self.calls:
            msg["tool_calls"] = [self._call_dict(c) for c in self.calls]
        if self.errors:
            msg["parse_error"] = self.errors[0] if len(self.errors) == 1 else {**self.errors[0],
                                                                                "more": self.errors[1:]}
        if self.warnings:
            msg["parse_warnings"] = list(self.warnings)
        return msg


def as_delta(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The OpenAI-style streaming delta an event stands for (None for events that add nothing)."""
    fld, kind = event.get("field"), event.get("type")
    if fld in ("content", "reasoning_content") and kind == "region_chunk":
        return {fld: event["text"]}
    if fld == "tool_calls":
        if kind == "region_open":
            call: dict[str, Any] = {"index": event["index"], "type": "function",
                                    "function": {"name": event["name"], "arguments": ""}}
            if "id" in event:
                call["id"] = event["id"]
            return {"tool_calls": [call]}
        if kind == "region_chunk":
            return {"tool_calls": [{"index": event["index"], "function": {"arguments": event["text"]}}]}
        if kind == "region_update":
            return {"tool_calls": [{"index": event["index"], "id": event["id"]}]}
    return None


# --------------------------------------------------------------------------- public parser

class MessageStream:
    """Incremental parser: ``feed(chunk) -> events``, ``finish() -> (message, events)``.

    Each event is a region event (``region_open``/``region_chunk``/``region_close`` with a
    ``field``); :func:`as_delta` reads it as an OpenAI delta.
    """

    def __init__(self, grammar: Parser, ts: ToolCallStructure, tools: Mapping[str, Any] | None,
                 strict: bool = False) -> None:
        self._session = Session(grammar)
        self._asm = Assembler(ts, tools)
        self._strict = strict
        self._done = False
        # the hot path: while the parser waits in plain text (``_arm``), a chunk without any
        # of ``_hot`` characters is appended to ``_tail`` and reported at once; what the
        # parser's input owes for it is settled before the next chunk that is not (``_settle``)
        self._hot: frozenset[str] | None = None
        self._tail: list[str] = []
        self._since = 0  # content/reasoning: ``_tail[_since:]`` came by the hot path, the input owes for it
        self._field = ""
        self._index = -1  # the call whose arguments the text is; -1: content/reasoning; -2: none (a wait)
        self._owed = 0  # characters and chunks the input owes (arguments; content compacted out of ``_tail``)
        self._owed_chunks = 0
        # the text of the open call while it has no name, from its start (kept as content if it
        # never gets one); a list of chunks, so that keeping it costs no copying
        self._keep: list[str] | None = None
        self._keep_call: _Call | None = None
        self._asm.raw = self._raw

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        hot = self._hot
        if hot is not None and chunk and hot.isdisjoint(chunk):
            index = self._index
            if index == -2:  # the parser waits for a bracket or a quote: nothing to report
                inp = self._session.inp
                if self._keep is not None:
                    self._keep.append(chunk)
                inp.feed(chunk)
                inp.fast.emitted = inp.end
                return []
            tail = self._tail
            tail.append(chunk)
            if index >= 0:
                self._owed += len(chunk)
                self._owed_chunks += 1
                return [{"type": "region_chunk", "field": "tool_calls", "index": index, "text": chunk,
                         "dirty": False}]
            if len(tail) >= 256:
                self._count_owed()
                self._asm.text[self._field].compact()
            return [{"type": "region_chunk", "field": self._field, "text": chunk, "dirty": False}]
        if self._done:
            raise RuntimeError("feed() after finish()")
        self._settle()
        out = self._feed(chunk)
        self._arm()
        return out

    def _count_owed(self) -> None:
        """What the hot path owes for the chunks it added to ``_tail`` (counted here, not per
        chunk); the callers see that it added some."""
        tail, since = self._tail, self._since
        self._owed_chunks += len(tail) - since
        self._owed += sum(map(len, tail[since:]))
        self._since = len(tail)

    def _settle(self) -> None:
        """The input positions the hot path owes: its chunks were emitted, nothing of them is
        read again."""
        if self._index == -1 and self._hot is not None and len(self._tail) > self._since:
            self._count_owed()
        if self._owed_chunks:
            inp = self._session.inp
            inp.end += self._owed
            inp.text, inp.base = "", inp.end
            inp.fast.emitted = inp.keep_from = inp.chunk_pos = inp.end
            inp.chunks += self._owed_chunks
            inp.soft_pins.clear()
            self._owed = self._owed_chunks = 0

    def _arm(self) -> None:
        """Whether the parser now waits in plain text of the message (content, reasoning or the
        arguments of an announced call) with nothing to read back."""
        self._hot = None
        session = self._session
        fast = session.inp.fast
        if fast is None or fast.stop is None or session.result is not None or fast.emitted != session.inp.end:
            return
        if not fast.tag:
            self._hot, self._index = fast.stop, -2
            return
        if session.inp.pins:
            return
        fld = FIELD.get(fast.tag)
        if fld is not None:
            self._hot, self._field, self._index, self._tail = fast.stop, fld, -1, self._asm.text[fld].tail
            self._since = len(self._tail)
            return
        call = self._asm.current
        if fast.tag == "tool_args" and call is not None and call.announced:
            self._hot, self._index, self._tail = fast.stop, call.index, call.args

    def _feed(self, chunk: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._keep is not None:
            self._keep.append(chunk)
        tag = self._session.take(chunk)
        if tag is None:
            self._asm.handle(self._session.inp.drain(), out)
            self._track_call()
        elif tag:
            self._asm._chunk(tag, chunk, out)
        return out

    def _track_call(self) -> None:
        """Keeps the open call's text from its start while it has no name."""
        call = self._asm.current
        if call is None or call.name:
            self._keep = self._keep_call = None
        elif call is not self._keep_call:
            inp = self._session.inp
            self._keep_call = call
            self._keep = [inp.get(call.start, inp.end)] if call.start >= inp.base else None

    def _raw(self, a: int, b: int) -> str | None:
        """The output's text from ``a`` to ``b``, if still at hand (see ``Assembler.raw``)."""
        if self._keep is not None and a >= self._keep_call.start:
            text = "".join(self._keep)
            self._keep = [text]
            at = self._keep_call.start
            return text[a - at:b - at] if b - at <= len(text) else None
        inp = self._session.inp
        return inp.get(a, b) if inp.base <= a <= b <= inp.end else None

    def finish(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self._settle()
        self._done = True
        self._hot = None
        end, events = self._session.finish()
        out: list[dict[str, Any]] = []
        self._asm.handle(events, out)
        if end == FAIL:  # the grammar cannot fail at top level; keep the rule explicit anyway
            inp = self._session.inp
            self._asm.errors.append({"position": inp.error_pos, "message": inp.error})
        message = self._asm.message()
        if self._strict and "parse_error" in message:
            err = message["parse_error"]
            raise ParseError(err["message"], position=err["position"])
        return message, out


class MessageParser:
    """Parses one model's output into an OpenAI-style assistant message.

    Example::

        >>> from analyzer import analyze_template
        >>> p = MessageParser(analyze_template("templates/chatml-think.jinja"))
        >>> p.parse("<think>\\nhmm\\n</think>\\nHi!")["content"]
        'Hi!'
    """

    def __init__(self, analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 tool_choice: str = "auto", parallel_tool_calls: bool = True, enable_thinking: bool = True,
                 mode: ReasoningMode | None = None) -> None:
        self.analysis = analysis
        self.tools = {t.get("function", t)["name"]: t.get("function", t) for t in (tools or [])}
        self.mode = mode if mode is not None else reasoning_mode_for(analysis, enable_thinking)
        self.tools_enabled = tool_choice != "none"
        self.parallel = parallel_tool_calls and analysis.tool_call_structure.supports_parallel
        self.grammar = build_message_grammar(analysis, mode=self.mode, tools_enabled=self.tools_enabled,
                                             parallel=self.parallel)

    def stream(self, *, strict: bool = False) -> MessageStream:
        return MessageStream(self.grammar, self.analysis.tool_call_structure, self.tools, strict)

    def parse(self, text: str, *, strict: bool = False) -> dict[str, Any]:
        """The message in ``text`` (raises ParseError only when ``strict``)."""
        s = self.stream(strict=strict)
        s._asm.quiet = True
        s._asm.raw = lambda a, b: text[a:b]
        s._session.inp.set_text(text)
        s._session._resume()
        return s.finish()[0]


def thinking_setting(analysis: TemplateAnalysis, enable_thinking: bool):
    """The analysis' thinking setting for a request: on → the setting the analysis found to let
    the model reason; off → ``enable_thinking=false`` if the template honours it, else another
    control's off value (``reasoning=false``, ``reasoning_effort="none"``)."""
    settings = list(analysis.thinking_settings)
    if not settings:
        return None
    if enable_thinking:
        on = [x for x in settings if x.generation_prompt == analysis.generation_prompt_thinking]
        return on[0] if on else (analysis.setting("enable_thinking=true") or settings[0])
    off = analysis.setting("enable_thinking=false")
    quiet = (ReasoningMode.DISABLED, ReasoningMode.NONE)
    if off is not None and off.reasoning_mode in quiet:
        return off
    return next((x for x in settings if x.reasoning_mode in quiet), off or settings[0])


def reasoning_mode_for(analysis: TemplateAnalysis, enable_thinking: bool) -> ReasoningMode:
    s = thinking_setting(analysis, enable_thinking)
    return s.reasoning_mode if s is not None else analysis.content_structure.reasoning_mode
