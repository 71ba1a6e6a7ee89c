"""Tool calls written as JSON objects (``{"name": ..., "arguments": ...}`` in any key order and
spacing): fields are routed by name, the arguments keep the model's own bytes.

Example::

    >>> from chat_autoparser.generator.peg import run_all
    >>> events = run_all(JsonCall(["name"], ["arguments"], ""), '{"arguments": {"a": 1}, "name": "f"}')[1]
    >>> [e for e in events if e[0] == "chunk"]
    [('chunk', 'tool_args', '{"a": 1}'), ('chunk', 'tool_name', 'f')]
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Sequence

from .peg import (FAIL, NEED, NO_LIMIT, SCAN, SLOW, Capture, Driven, Input, JsonValue, Marker, Parser, Run, _Fast,
                  deviate, number_cut, past_ws, skip_ws)
from .plan import CallPlan
from .recovery import Recover
from .values import PYTHON, LiteralValue


class JsonCall(Parser):
    """A call written as a JSON object: fields routed by name (``name``, ``arguments``, ``id``
    as the template names them, and the synonyms models use), in any order and spacing; an object
    under another key after the name, while no arguments were read, is read as the arguments with
    an error (a misspelled key loses nothing); other fields are skipped. Arguments given as a JSON-encoded string are decoded. Invalid arguments
    are kept raw up to ``stops`` (the call's closing markers)."""

    def __init__(self, name_fields: Sequence[str], args_fields: Sequence[str], id_field: str,
                 name_as_key: bool = False, stops: Sequence[Marker] = (), wrappers: Sequence[str] = (),
                 own_keys: Sequence[str] = ()) -> None:
        self.wrappers = frozenset(wrappers)  # the keys of objects the template wraps the call in
        self.own_keys = frozenset(own_keys)  # every key the template writes in a call object
        self.name_fields, self.args_fields = frozenset(name_fields), frozenset(args_fields)
        # the keys the template writes (the first given); the others are synonyms
        self.name_key, self.args_key = next(iter(name_fields), ""), next(iter(args_fields), "")
        self.id_field = id_field
        self.name_as_key = name_as_key
        self.stops = list(stops) or [Marker("}")]
        self._name = Capture("tool_name", JsonString())
        self._id = Capture("tool_id", JsonString())
        self._args = Capture("tool_args", Recover(JsonValue(), self.stops))
        # arguments written as a Python dict (a template that prints a dict writes its repr)
        self._python_args = Capture("args_literal", Recover(LiteralValue(PYTHON, stops=[m.core for m in self.stops]),
                                                            self.stops))
        self._encoded_args = Capture("tool_args", EncodedJson())
        self._skip_value = JsonValue(tag="")

    def first(self) -> tuple[str, ...]:
        return ("{",)

    def fast(self, inp: Input, pos: int) -> int:
        """A whole, valid object already in the buffer, read with the C decoder; anything else
        (incomplete, broken: recovery decides) goes the streaming way."""
        events: list[tuple] = []
        end = self._fast_object(inp, pos - inp.base, events, [False, False])
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
            inp.chunks += sum(1 for e in events if e[0] in ("chunk", "stray"))
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
            key_at = i
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
            if self.name_as_key and named[0]:  # (a key after the name's: kept as content)
                events += self._stray(key_at + inp.base, key, text[key_at:j])
            elif self.name_as_key:
                named[0] = True
                events += [("open", "tool_name"), ("chunk", "tool_name", key), ("close", "tool_name"),
                           ("open", "tool_args"), ("chunk", "tool_args", text[i:j]), ("close", "tool_args"),
                           _JSON_OK]
            elif key in self.name_fields and isinstance(value, str) and named[0]:
                events.append(("error", i + inp.base, f"repeated key {key!r} in the call object (ignored)"))
            elif (key in self.name_fields and isinstance(value, str)) or (key == self.id_field and self.id_field):
                tag = "tool_name" if key in self.name_fields else "tool_id"
                if tag == "tool_name" and key != self.name_key:
                    events.append(self._synonym(i + inp.base, key, self.name_key))
                named[0] = named[0] or tag == "tool_name"
                events += [("open", tag)]
                value = value if isinstance(value, str) else json.dumps(value)
                if value:
                    events.append(("chunk", tag, value))
                events.append(("close", tag))
            elif key in self.args_fields or (named[0] and isinstance(value, dict) and not named[1]):
                named[1] = True
                args = decoded_json(value) if isinstance(value, str) else None
                if key not in self.args_fields:
                    events.append(("error", i + inp.base, self._unknown(key)))
                elif key != self.args_key:
                    events.append(self._synonym(i + inp.base, key, self.args_key))
                if args is not None:
                    events.append(("deviation", i + inp.base, ENCODED))
                events += [("open", "tool_args"), ("chunk", "tool_args", text[i:j] if args is None else args),
                           ("close", "tool_args"), _JSON_OK]
            elif isinstance(value, dict) and not named[0]:
                if key not in self.wrappers:
                    events.append(("deviation", i + inp.base, _wrapped(key)))
                if self._fast_object(inp, i, events, named) is None:  # a wrapper ({"function": {...}})
                    return None
            elif key not in self.own_keys:
                events += self._stray(key_at + inp.base, key, text[key_at:j])
            m = _NEXT.match(text, j)
            if m is None:
                return None
            if m.group(1) == "}":
                return m.end(1)
            i = m.end()

    def run(self, inp: Input, pos: int) -> Run:
        end = yield from self._object(inp, pos, [False, False])
        inp.recovered = False
        return end

    @staticmethod
    def _stray(pos: int, key: str, field: str) -> list[tuple]:
        """A field the template does not write, read nowhere else: reported, kept as content (by
        the assembler: once the call is shown; a call never shown is kept verbatim, field and all)."""
        return [("error", pos, f"key {key!r} in the call object (kept as content)"), ("stray", field)]

    def _kept(self, inp: Input, key_at: int, key: str, pos: int) -> Run:
        """The field from ``key_at`` whose value starts at ``pos``, read nowhere else: kept whole
        (the text from its key on stays at hand), as content (see ``_stray``); its end."""
        inp.pin(key_at)
        try:
            pos = yield from self._skip_value.run(inp, pos)
        finally:
            inp.unpin(key_at)
        if pos != FAIL:
            inp.events += self._stray(key_at, key, inp.get(key_at, pos))
            inp.chunks += 1  # (text read: a break after it resumes past it)
            inp.chunk_pos = pos
        return pos

    def _unknown(self, key: str) -> str:
        return f"arguments read from the call's {key!r} key (the template writes {self.args_key!r})"

    @staticmethod
    def _synonym(pos: int, key: str, own: str) -> tuple:
        return ("deviation", pos, f"the call's {key!r} key where the template writes {own!r}")

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
            key_at = pos
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
                if not isinstance(key, str):  # (a JSON key is a string: ``{{}: 1}`` is no object)
                    return inp.fail(key_start, "invalid JSON key")
                pos = yield from skip(pos)
                if at(pos) != ":":
                    return inp.fail(pos, "expected ':'")
                pos = yield from skip(pos + 1)
            inp.recovered = False
            value: Parser | None = self._skip_value
            if self.name_as_key and named[0]:  # (a key after the name's: kept as content)
                pos = yield from self._kept(inp, key_at, key, pos)
                value = None
            elif self.name_as_key:
                named[0] = True
                inp.events += [("open", "tool_name"), ("chunk", "tool_name", key), ("close", "tool_name")]
                value = self._args
            elif key in self.name_fields and at(pos) == '"' and named[0]:
                inp.events.append(("error", pos, f"repeated key {key!r} in the call object (ignored)"))
            elif key in self.name_fields and at(pos) == '"':
                named[0] = True
                value = self._name
                if key != self.name_key:
                    inp.events.append(self._synonym(pos, key, self.name_key))
            elif key in self.args_fields or (named[0] and at(pos) == "{" and not named[1]):
                named[1] = True
                value = self._encoded_args if at(pos) == '"' else self._args
                if at(pos) == "{":  # ({'city': ...}: a Python dict)
                    inp.pin(pos)
                    try:
                        inside = yield from skip(pos + 1)
                    finally:
                        inp.unpin(pos)
                    if at(inside) == "'":
                        value = self._python_args
                        inp.events.append(("deviation", pos, PYTHON_ARGS))
                if key not in self.args_fields:
                    inp.events.append(("error", pos, self._unknown(key)))
                elif key != self.args_key:
                    inp.events.append(self._synonym(pos, key, self.args_key))
            elif key == self.id_field and self.id_field:
                value = self._id
            elif not named[0] and at(pos) == "{":
                value = None
                if key not in self.wrappers:
                    inp.events.append(("deviation", pos, _wrapped(key)))
                pos = yield from self._object(inp, pos, named)
            elif key not in self.own_keys:
                pos = yield from self._kept(inp, key_at, key, pos)
                value = None
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


def _wrapped(key: str) -> str:
    return f"the call wrapped in a {key!r} object"


ENCODED = "arguments written as a JSON-encoded string"
PYTHON_ARGS = "arguments written as a Python dict"
_WS = re.compile(r"[ \t\r\n]*")
_JSON_OK = ("json_ok",)  # the arguments just closed were decoded whole: valid JSON
_NAME_OPEN, _ID_OPEN, _ARGS_OPEN = ("open", "tool_name"), ("open", "tool_id"), ("open", "tool_args")
_OPEN = re.compile(r"[ \t\r\n]*\{[ \t\r\n]*")
_COLON = re.compile(r"[ \t\r\n]*:[ \t\r\n]*")
_NEXT = re.compile(r"[ \t\r\n]*([,}])[ \t\r\n]*")


def _at(inp: Input, pos: int, literal: str) -> Run:
    """Whether ``literal`` stands at ``pos`` (waiting while the input may still complete it)."""
    while inp.end - pos < len(literal) and not inp.eof and literal.startswith(inp.get(pos, inp.end)):
        inp.wake = pos + len(literal)  # (nothing to decide before)
        yield NEED
    return inp.startswith(literal, pos)


def _peek(inp: Input, pos: int, s: str) -> Run:
    while inp.end - pos < len(s) and not inp.eof:
        inp.wake = pos + len(s)
        yield NEED
    return inp.startswith(s, pos)


def decoded_json(value: str) -> str | None:
    """The JSON text a string holds when it holds a JSON object or array (arguments written as
    a JSON-encoded string), else None."""
    text = value.strip()
    if not text[:1] in ("{", "["):
        return None
    try:
        json.loads(text)
    except ValueError:
        return None
    return value


def _raw_value(inp: Input, pos: int) -> Run:
    """One JSON value read as it arrives, untagged: ``(end, its text)`` (``end`` FAIL if broken)."""
    start = inp.pin(pos)
    try:
        end = yield from JsonValue(tag="").run(inp, pos)
    finally:
        inp.unpin(start)
    return end, (inp.get(start, end) if end != FAIL else "")


class EncodedJson(Parser):
    """A JSON string value that holds JSON (``"{\\"city\\": \\"Paris\\"}"``): the JSON it holds is
    the region's text; any other string stays as written (a JSON string)."""

    def fast(self, inp: Input, pos: int) -> int:
        found = _string_now(inp.text, pos - inp.base)
        if found is None:
            return SLOW
        end = found[1] + inp.base
        return self._emit(inp, pos, found[0], inp.get(pos, end), end)

    def run(self, inp: Input, pos: int) -> Run:
        end, raw = yield from _raw_value(inp, pos)
        if end == FAIL:
            return FAIL
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        return self._emit(inp, pos, value, raw, end)

    @staticmethod
    def _emit(inp: Input, pos: int, value: object, raw: str, end: int) -> int:
        """The JSON ``value`` holds when it is a string holding JSON, else the ``raw`` text."""
        decoded = decoded_json(value) if isinstance(value, str) else None
        if decoded is not None:
            inp.events.append(("deviation", pos, ENCODED))
        inp.emit(inp.tag(None), decoded or raw, end)
        inp.events.append(_JSON_OK)
        return end

    def first(self) -> tuple[str, ...]:
        return ('"',)


class JsonString(Parser):
    """A JSON string value; its decoded text is the region's text (a bare value is taken as is)."""

    def fast(self, inp: Input, pos: int) -> int:
        found = _string_now(inp.text, pos - inp.base)
        if found is None:
            return SLOW
        inp.emit(inp.tag(None), found[0], found[1] + inp.base)
        return found[1] + inp.base

    def run(self, inp: Input, pos: int) -> Run:
        end, raw = yield from _raw_value(inp, pos)
        if end == FAIL:
            return FAIL
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        inp.emit(inp.tag(None), value if isinstance(value, str) else json.dumps(value), end)
        return end

    def first(self) -> tuple[str, ...]:
        return ('"',)


class JsonCalls(Driven):
    """One or more call objects, the ways models write them: one object, several separated by
    commas, semicolons or whitespace, or a JSON array of them; each possibly framed by the
    call's own markers (``<tool_call>{...}</tool_call>``), the closing one possibly missing.
    Stops before anything else (what follows is not the calls' business).

    ``call`` parses one object (a tagged :class:`JsonCall`); ``max_calls`` limits how many are
    read (1 when the request does not allow parallel calls)."""

    def __init__(self, call: Parser, frame_open: Marker | None = None, frame_close: Marker | None = None,
                 max_calls: int | None = None, array: bool | None = None, sep: str | None = None,
                 plan: CallPlan | None = None) -> None:
        self.call = call
        # a call framed and written as the template writes it, read whole (one-shot)
        self.plan = plan if array is not True else None
        # the template's own form (None: not known): calls in a JSON array or not, and what
        # separates them ("," or "" for whitespace); the others are deviations
        self.array = array
        self.sep = sep
        self.frame_open = frame_open.loose() if frame_open is not None and frame_open.core else None
        self.frame_close = frame_close.loose() if frame_close is not None and frame_close.core else None
        self.max_calls = max_calls
        # one-shot, the calls after a call that the plan reads in a row: where nothing needs
        # deciding between them (whitespace between calls is the template's, or not known, and
        # the frame cannot be read as a separator)
        self._in_a_row = self.plan is not None and self.frame_open is not None and sep in (None, "") and \
            self.plan.lead.startswith(self.frame_open.core) and self.frame_open.core[0] not in ",;"

    def first(self) -> tuple[str, ...]:
        return (self.frame_open.core,) if self.frame_open is not None else ("{", "[")

    def _starts(self, inp: Input, p: int) -> Run:
        """Whether a call starts at ``p``: an object, an array whose first item is an object, or
        the call's frame."""
        if self.frame_open is not None and (inp.startswith(self.frame_open.core, p) if inp.eof else (yield from _at(inp, p, self.frame_open.core))):
            return True
        while p >= inp.end and not inp.eof:
            yield NEED
        c = inp.get(p, p + 1)
        if c == "[":
            q = (past_ws(inp, p + 1) if inp.eof else (yield from skip_ws(inp, p + 1)))
            return inp.get(q, q + 1) == "{"
        return c == "{"

    def _item(self, inp: Input, pos: int) -> Run:
        """One framed or bare object, or an array of them: (end, calls read) or (FAIL, _).

        Each object is a ``tool_call`` region; a lone object's region takes in its frame, so a
        call that never gets a name is kept with its markup."""
        if inp.whole and self.plan is not None:
            end, n = self.plan.emit(inp, pos)
            if n:
                return end, 1
        count = 0
        p = pos
        framed = self.frame_open is not None and (inp.startswith(self.frame_open.core, p) if inp.eof else (yield from _at(inp, p, self.frame_open.core)))
        if framed:
            r = self.frame_open.fast(inp, p)
            p = (yield from self.frame_open.run(inp, p)) if r == SLOW else r
        p = (past_ws(inp, p) if inp.eof else (yield from skip_ws(inp, p)))
        array = inp.get(p, p + 1) == "["
        if self.array is not None and array != self.array:
            deviate(inp, p, "calls in a JSON array" if array else "a call not in a JSON array")
        if array:
            p = (past_ws(inp, p + 1) if inp.eof else (yield from skip_ws(inp, p + 1)))
        while True:
            if inp.get(p, p + 1) != "{":
                return inp.fail(p, "expected a call object"), count
            start = pos if count == 0 and not array else p
            inp.events.append(("open", "tool_call", start))
            inp.tags.append("tool_call")
            try:
                r = self.call.fast(inp, p)
                p = (yield from self.call.run(inp, p)) if r == SLOW else r
            finally:
                inp.tags.pop()
            if p == FAIL:
                inp.events.append(("close", "tool_call", max(inp.error_pos, start), False))
                return FAIL, count
            count += 1
            if not array:
                break
            inp.events.append(("close", "tool_call", p, True))
            inp.region_end = p
            q = (past_ws(inp, p) if inp.eof else (yield from skip_ws(inp, p)))
            c = inp.get(q, q + 1)
            if c in ",;":
                self._separated(inp, q, c)
                p = (past_ws(inp, q + 1) if inp.eof else (yield from skip_ws(inp, q + 1)))
                continue
            if c == "{":  # the comma forgotten
                self._separated(inp, q, "")
                p = q
                continue
            if c == "]":
                p = q + 1
            break  # an array left open ends with its last object
        if framed:
            q = (past_ws(inp, p) if inp.eof else (yield from skip_ws(inp, p)))
            if self.frame_close is not None and (inp.startswith(self.frame_close.core, q) if inp.eof else (yield from _at(inp, q, self.frame_close.core))):
                r = self.frame_close.fast(inp, q)
                p = (yield from self.frame_close.run(inp, q)) if r == SLOW else r
            elif self.frame_close is not None and inp.eof and q >= inp.end:
                inp.events.append(("error", q, f"output ends before {self.frame_close.core!r}"))
            elif self.frame_close is not None:
                deviate(inp, q, f"{self.frame_close.core!r} missing")
        if not array:
            inp.events.append(("close", "tool_call", p, True))
            inp.region_end = p
        return p, count

    def run(self, inp: Input, pos: int) -> Run:
        count = 0
        p = (past_ws(inp, pos) if inp.eof else (yield from skip_ws(inp, pos)))
        while True:
            end, n = yield from self._item(inp, p)
            if end == FAIL:
                return FAIL
            count += n
            pos = end
            if self._in_a_row and inp.whole:
                pos, n = self.plan.emit(inp, pos, self.max_calls - count if self.max_calls is not None else NO_LIMIT)
                count += n
            if self.max_calls is not None and count >= self.max_calls:
                return pos
            q = (past_ws(inp, pos) if inp.eof else (yield from skip_ws(inp, pos)))
            sep = inp.get(q, q + 1) if inp.get(q, q + 1) in (",", ";") else ""
            if sep:
                q = (past_ws(inp, q + 1) if inp.eof else (yield from skip_ws(inp, q + 1)))
            if not (yield from self._starts(inp, q)):
                return pos
            self._separated(inp, q, sep)
            p = q

    def _separated(self, inp: Input, pos: int, sep: str) -> None:
        """Two calls separated by ``sep`` ("" for whitespace): a deviation when the template
        separates them otherwise."""
        if self.sep is not None and sep != self.sep:
            deviate(inp, pos, f"calls separated by {sep or 'whitespace'!r}, not {self.sep or 'whitespace'!r}")
