"""Runtime events → the assistant message, and region events for streaming.

The parser's events (``open``/``chunk``/``close`` of tagged regions, whole calls, errors) are
assembled into the OpenAI-style message (content, reasoning, tool calls with JSON arguments)
and, while streaming, into region events (seed 004's model) that :func:`as_delta` reads as
OpenAI deltas.

Example::

    >>> from chat_autoparser.analyzer.structures import ToolCallStructure
    >>> asm = Assembler(ToolCallStructure(), None)
    >>> asm.handle([("open", "content"), ("chunk", "content", "Hi"), ("close", "content")], [])
    >>> asm.message()["content"]
    'Hi'
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

from chat_autoparser.analyzer.structures import FunctionFormat, ToolCallStructure, ValueFormat

from .values import (PYTHON, allows_null, encode_string, schema_type, to_json_text, typed_json, unterminated,
                     unwrap_cdata)


FIELD = {"reasoning": "reasoning_content", "content": "content"}


class CallState:
    """One call being assembled (a plain slotted class: one is made per call, in the hot path)."""

    __slots__ = ("index", "name", "id", "args", "announced", "pending", "json_ok", "n_args", "key",
                 "value_parts", "value_streaming", "arg_type", "literal", "args_literal", "errors", "start",
                 "chunked", "keys", "stray")

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
        self.keys: set[str] = set()  # the parameter names read so far
        self.key = ""
        self.value_parts: list[str] = []
        self.value_streaming = False
        self.arg_type = ""
        self.literal: list[str] = []
        self.args_literal: list[str] = []
        self.errors: list[str] = []
        self.stray: list[str] = []  # text written inside the call that is none of its parts (content)


class WholeCall:
    """A call read whole by its plan (one-shot), as its arguments are checked and typed (the
    message keeps the call's dict)."""

    __slots__ = ("index", "name", "key", "arg_type", "errors")

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name
        self.key = ""  # (the argument being typed)
        self.arg_type = ""
        self.errors: list[str] = []


class TextBuffer:
    """Appended text in compact pieces: a stream of 4-character chunks costs about one byte per
    character, not one str object per chunk."""

    __slots__ = ("parts", "tail", "_compacted")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.tail: list[str] = []
        self._compacted = 0  # characters in ``parts``

    def write(self, text: str) -> None:
        self.tail.append(text)
        if len(self.tail) >= 256:
            self.compact()

    def compact(self) -> None:
        """The pieces appended so far as one (``tail`` stays the same list)."""
        piece = "".join(self.tail)
        self.parts.append(piece)
        self._compacted += len(piece)
        self.tail.clear()

    def getvalue(self) -> str:
        return "".join(self.parts) + "".join(self.tail)

    def size(self) -> int:
        """Characters appended so far."""
        return self._compacted + sum(map(len, self.tail))

    def last(self, n: int) -> str:
        """The last ``n`` characters (or all, if fewer), without joining the whole buffer."""
        picked: list[str] = []
        for piece in itertools.chain(reversed(self.tail), reversed(self.parts)) if n > 0 else ():
            picked.append(piece[-n:])
            n -= len(picked[-1])
            if n <= 0:
                break
        return "".join(reversed(picked))


IdFactory = Callable[[int, str, str], str]


ID_CONTEXT = 64  # characters of reasoning and of content before a call that its default id hashes


def default_call_id(index: int, name: str, before: str) -> str:
    """``call_`` and 24 hex digits: 12 of a hash of the text the output holds before the call
    (the length and the last :data:`ID_CONTEXT` characters of reasoning and of content), 8 of a
    hash of its name, 4 of its index (more past 65535): deterministic, so a conversation rendered
    again with the parsed message keeps its ids (and its prefix cache). Each hash is computed
    once per distinct text: the calls of one section share the text before them.

    Example::

        >>> default_call_id(0, "get_weather", "") == default_call_id(0, "get_weather", "")
        True
        >>> len({default_call_id(i, n, b) for i in (0, 1) for n in ("f", "g") for b in ("", "x")})
        8
    """
    return _id_head(before, name) + "%04x" % index


@lru_cache(maxsize=1024)
def _id_head(before: str, name: str) -> str:
    """An id's first 25 characters (the calls of one section share the text before them, and
    often the name)."""
    return "call_" + _context_digest(before) + _name_digest(name)


@lru_cache(maxsize=256)
def _context_digest(before: str) -> str:
    return hashlib.blake2b(before.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


@lru_cache(maxsize=1024)
def _name_digest(name: str) -> str:
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


@dataclass(frozen=True)
class CallShape:
    """What the assembler reads of a tool-call structure (once per parser, not per parse)."""

    cdata: bool  # values may be wrapped in CDATA
    name_part: bool  # the name is a part of its own (else it comes from the id)
    # a call is announced once its name is read, unless an id may still come: between the name
    # and the arguments, or after the arguments in a JSON object
    id_may_follow: bool

    @classmethod
    def of(cls, ts: ToolCallStructure) -> CallShape:
        kinds = [p.kind for p in ts.call_parts]
        id_follows_name = "name" in kinds and "id" in kinds and \
            kinds.index("name") < kinds.index("id") < (kinds.index("args") if "args" in kinds else len(kinds))
        return cls(any(f.cdata_chars for _, f in ts.value_formats), "name" in kinds,
                   id_follows_name or (ts.function_format == FunctionFormat.JSON_OBJECT and bool(ts.id_field)))


class Assembler:
    """Turns runtime events into the message and into region events (seed 004 model), each of
    which also reads as an OpenAI-style delta (:func:`as_delta`)."""

    def __init__(self, ts: ToolCallStructure, tools: Mapping[str, Mapping[str, Any]] | None,
                 id_factory: IdFactory | None = None, shape: CallShape | None = None) -> None:
        self.ts = ts
        # the template's own separator between calls closes a section and opens the next: a
        # second section is its form, not a deviation
        start, end = ts.tool_section_start.strip(), ts.tool_section_end.strip()
        self._section_per_call = bool(start) and "".join(ts.call_separator.split()) == "".join((end + start).split())
        self.tools = tools if type(tools) is dict else dict(tools or {})  # (read only)
        self.id_factory = id_factory or default_call_id
        self.text: dict[str, TextBuffer] = {"reasoning_content": TextBuffer(), "content": TextBuffer()}
        self._texts = (self.text["reasoning_content"], self.text["content"])
        self._before: tuple[tuple[int, ...], str] = ((), "")  # the texts' state and what ids hash of them
        self.calls: list[CallState | dict[str, Any]] = []  # (a call read whole: its dict in the message)
        self.current: CallState | None = None
        self.open: str | None = None
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.deviations: list[dict[str, Any]] = []
        self._sections = 0  # tool sections read
        self._name: list[str] = []
        self._id: list[str] = []
        self._typers: dict[tuple[str, str], Callable[[str], str]] = {}  # see ``_typer``
        self._in: str | None = None  # tag of the tool sub-region being read
        self.quiet = False  # build the message only (one-shot parsing): no region events
        # the output's text between two absolute positions, while it is still at hand (None if not)
        self.raw: Callable[[int, int], str | None] | None = None
        shape = shape or CallShape.of(ts)
        self._cdata, self._name_part, self._id_may_follow = shape.cdata, shape.name_part, shape.id_may_follow

    # ---- output events
    def _region(self, kind: str, fld: str, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "field": fld, **extra}

    def handle(self, events: Iterable[tuple], out: list[dict[str, Any]]) -> None:
        for ev in events:
            kind = ev[0]
            if kind == "chunk":
                self.chunk(ev[1], ev[2], out)
            elif kind == "whole_call":  # read whole by its plan (one-shot): (start, end, name, id, arguments)
                self._whole(ev[3], ev[4], ev[5])
            elif kind == "open":
                if ev[1] == "tool_call":  # ("open", "tool_call", where it starts)
                    self.current = CallState(len(self.calls), ev[2])
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
                elif self.current is not None:  # a call shown already ends where it broke, with what it read
                    self._close_call(pos, False, out)
            elif kind == "stray":  # text inside a call that is none of its parts: content once it is shown
                if self.current is not None:
                    self.current.stray.append(ev[1])
                else:
                    self._content(ev[1], out)
            elif kind == "content_at":  # text the input no longer holds, as content: (start, end)
                text = self.raw(ev[1], ev[2]) if self.raw is not None else None
                if text is None:
                    self.errors.append({"position": ev[1], "message": f"text up to {ev[2]} no longer at hand"})
                else:
                    self._content(text, out)
            elif kind == "warning":
                self.warnings.append(ev[1])
            elif kind == "deviation":  # a form the template does not write, read anyway (``strict`` refuses it)
                self.deviations.append({"position": ev[1], "message": ev[2]})
            elif kind == "section":
                if self._sections and not self._section_per_call:
                    self.deviations.append({"position": ev[1], "message": "a second tool section"})
                self._sections += 1
            elif kind == "error":
                _, pos, msg = ev
                self.errors.append({"position": pos, "message": msg})
                if self.current is not None:
                    self.current.errors.append(msg)

    def _whole_call(self, call: CallState, name: str, call_id: str | None, args: str) -> None:
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
            self._ensure_id(call)

    def _whole(self, name: str, call_id: str | None, args: str | list[tuple[str, str]]) -> None:
        """A call read whole by its plan (one-shot; canonical, so whole): what opening, reading
        and closing its name, id and arguments in turn does, without region events, kept as the
        message's call. ``args``: the JSON text, or the raw ``(key, value)`` texts of tagged
        arguments."""
        name = self._checked_name(name)
        index = len(self.calls)
        if type(args) is not str:
            args = self._units_json(WholeCall(index, name), args)
        elif args[:1] != "{":  # (a plan reads arguments from their first character)
            self._check_object(WholeCall(index, name), args)
        self.calls.append({"id": call_id or self._call_id(index, name), "type": "function",
                           "function": {"name": name, "arguments": args}})

    def _units_json(self, call: WholeCall, units: list[tuple[str, str]]) -> str:
        """The arguments JSON of tagged units read whole: valid as built (keys and values encoded,
        typed values written as JSON writes them; no key twice: a plan leaves such a call to the
        general parser, which reports it)."""
        items, typers = [], self._typers
        for key, value in units:
            typer = typers.get((call.name, key))
            if typer is None:
                call.key = key
                typer = self._typer(call)
            items.append(f"{encode_string(key.strip())}: {typer(value)}")
        return "{" + ", ".join(items) + "}"

    def _check_object(self, call: CallState, args: str) -> None:
        """Valid JSON arguments that are not an object are reported (kept as written)."""
        if not args.lstrip(" \t\r\n").startswith("{") and not call.errors:
            self.errors.append({"position": -1, "message": f"arguments of {call.name!r} are not a JSON object "
                                                           "(kept as the model wrote them)"})

    def _key_json(self, call: CallState) -> str:
        """The JSON that opens the argument ``call.key`` (``{"key": `` or ``, "key": ``)."""
        key = call.key.strip()
        if key in call.keys:  # kept (the arguments hold every value), but JSON readers keep the last
            message = f"parameter {key!r} of {call.name!r} written twice"
            self.errors.append({"position": -1, "message": message})
            call.errors.append(message)
        call.keys.add(key)
        call.n_args += 1
        return ("{" if call.n_args == 1 else ", ") + encode_string(key) + ": "

    def _value_json(self, call: CallState, raw: str) -> str:
        """JSON for the raw text of the value of ``call.key`` read whole."""
        if call.arg_type:  # (a typed marker was read: it decides with the schema)
            string = self._string_typed(call)
            return encode_string(raw) if raw and string else \
                typed_json(unwrap_cdata(raw), self._param_schema(call), self._value_format())
        return self._typer(call)(raw)

    def _typer(self, call: CallState) -> Callable[[str], str]:
        """JSON for a raw value of ``call.key``, by what the schema says of it (once per tool and
        key: a call's arguments are typed in the hot path)."""
        typer = self._typers.get((call.name, call.key))
        if typer is None:
            string, schema, fmt = self._string_typed(call), self._param_schema(call), self._value_format()

            def typer(raw: str) -> str:
                if raw and string:
                    return encode_string(raw)
                return typed_json(unwrap_cdata(raw), schema, fmt)
            self._typers[(call.name, call.key)] = typer
        return typer

    def _ensure_id(self, call: CallState) -> None:
        """A call the model wrote no id for gets one from the factory (OpenAI clients answer a
        call by its id), from what the output holds before it: the same output, the same ids.
        Each text is given as its length and its last :data:`ID_CONTEXT` characters (a hash of
        all of it for every call would cost the square of the output's length)."""
        if call.id is None:
            call.id = self._call_id(call.index, call.name)

    def _call_id(self, index: int, name: str) -> str:
        r, c = self._texts
        key = len(r.parts), len(r.tail), len(c.parts), len(c.tail)  # changes with every write
        before = self._before
        if key != before[0]:
            before = self._before = key, f"{r.size()}:{r.last(ID_CONTEXT)}\x00{c.size()}:{c.last(ID_CONTEXT)}"
        return self.id_factory(index, name, before[1])

    def _set_name(self, call: CallState, name: str) -> None:
        call.name = self._checked_name(name)

    def _checked_name(self, name: str) -> str:
        """A call's name as the message gives it; a tool the request does not have is reported."""
        name = name.strip()
        if self.tools and name and name not in self.tools:
            self.warnings.append(f"call to unknown tool {name!r}")
        return name

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

    def _emit_args(self, call: CallState, text: str, out: list[dict[str, Any]]) -> None:
        if not text:
            return
        call.args.append(text)
        if call.announced:
            if not self.quiet:  # (a literal: this is the streaming path of every argument chunk)
                out.append({"type": "region_chunk", "field": "tool_calls", "index": call.index, "text": text,
                            "dirty": False})
        else:
            call.pending.append(text)

    def _announce(self, call: CallState, out: list[dict[str, Any]]) -> None:
        if call.announced or not call.name:
            return
        call.announced = True
        self._ensure_id(call)
        extra = {"index": call.index, "name": call.name, "id": call.id}
        if not self.quiet:
            out.append(self._region("region_open", "tool_calls", **extra))
        for text in call.pending:
            if not self.quiet:
                out.append(self._region("region_chunk", "tool_calls", index=call.index, text=text, dirty=False))
        call.pending = []

    def _param_schema(self, call: CallState) -> dict[str, Any] | None:
        tool = self.tools.get(call.name) or {}
        props = (tool.get("parameters") or {}).get("properties") or {}
        return props.get(call.key)

    def chunk(self, tag: str, text: str, out: list[dict[str, Any]]) -> None:
        """A chunk of text of region ``tag`` (content, reasoning, or a part of the open call)."""
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
                self._emit_args(call, encode_string(text)[1:-1], out)
            else:
                call.value_parts.append(text)

    def _string_typed(self, call: CallState) -> bool:
        """A raw tagged value streams as a JSON string when its schema (or, without one, its
        typed marker) says string: the text is final as it arrives. (Not for formats that may
        wrap values in CDATA: those are read whole and unwrapped.)"""
        if self._cdata:
            return False
        schema = self._param_schema(call)
        t = schema_type(schema)
        if t is not None:  # (a string that may be null is read whole: "null" is then null)
            return t == "string" and not allows_null(schema)
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
            written = "".join(self._id)
            if not written:
                return
            call.id = written
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
                converted, python = _args_json(text, self.ts.args_format)
                if python and self.ts.args_format.kind != "json":  # (a JSON call reports it as it reads it)
                    self.deviations.append({"position": call.start, "message": "arguments written as a Python literal"})
            except (ValueError, SyntaxError) as e:
                converted = text
                call.errors.append(f"arguments not readable: {e}")
                self.errors.append({"position": -1, "message": f"arguments of {call.name!r} not readable (kept raw)"})
            self._announce(call, out)
            self._emit_args(call, converted, out)
        elif tag == "arg_key":
            self._announce(call, out)
            self._emit_args(call, self._key_json(call), out)
        elif tag in ("arg_value", "arg_literal"):
            if tag == "arg_value" and call.value_streaming:
                self._emit_args(call, '"', out)
            elif tag == "arg_value":
                self._emit_args(call, self._value_json(call, "".join(call.value_parts)), out)
            else:
                self._emit_args(call, self._literal_json("".join(call.literal), call), out)
            call.arg_type = ""

    def _literal_json(self, raw: str, call: CallState) -> str:
        """JSON for a value written as a literal: in the template's format, else as a Python
        literal (models write Python quoting where templates write another), else typed by the
        parameter's schema."""
        string = dict(self.ts.value_formats).get("string") or ValueFormat()
        for fmt in (string, PYTHON):
            try:
                return to_json_text(raw, fmt)
            except (ValueError, SyntaxError):
                continue
        cut = unterminated(raw, string)
        return typed_json(cut if cut is not None else raw, self._param_schema(call))

    def _close_call(self, end: int, whole: bool, out: list[dict[str, Any]]) -> None:
        """The end of a call: ``end`` is where it ends (``whole``) or where it broke."""
        call = self.current
        if call is not None and not call.name and call.id:
            call.name = self._name_from_id(call.id)
        if call is not None and call.name:
            self._finish_call(call, out)
            self.calls.append(call)
            for text in call.stray:
                self._content(text, out)
        elif call is not None:
            self._unnamed(call, out, end, whole)
        self.current = None

    def _content(self, text: str, out: list[dict[str, Any]]) -> None:
        """``text`` as a region of content of its own."""
        self._open("content", out)
        self.chunk("content", text, out)
        self._close("content", out)

    def _unnamed(self, call: CallState, out: list[dict[str, Any]], end: int = -1, whole: bool = False) -> None:
        """A call that never got a name was never shown: its text stays, as content. Verbatim
        when the output still holds it (``raw``): the whole call, or up to where it broke when it
        read some text (else the broken segment's text is content already); else what it read."""
        raw = None
        if self.raw is not None and call.start < end and (whole or call.chunked):
            raw = self.raw(call.start, end)
        text = raw if raw is not None else "".join(call.stray) + "".join(call.args)
        if text:
            self.errors.append({"position": call.start if raw is not None else -1,
                                "message": "a tool call without a name (kept as content)"})
            self._content(text, out)
        call.args = []

    def _name_from_id(self, call_id: str) -> str:
        """The function name inside an id that carries it (``functions.get_weather:0``): the
        longest known tool name it contains, else the id without a namespace and an index."""
        known = [n for n in self.tools if n in call_id]
        if known:
            return max(known, key=len)
        return re.sub(r"[:_-]\d+$", "", call_id).rsplit(".", 1)[-1]

    def _value_format(self) -> ValueFormat | None:
        return dict(self.ts.value_formats).get("object")

    def _finish_call(self, call: CallState, out: list[dict[str, Any]]) -> None:
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
        else:  # valid JSON, but not an object (a broken object reads as its first string)
            self._check_object(call, args)
        if not self.quiet:
            out.append(self._region("region_close", "tool_calls", index=call.index, value=self._call_dict(call)))

    def _call_dict(self, call: CallState) -> dict[str, Any]:
        args = call.args[0] if len(call.args) == 1 else "".join(call.args)
        if call.id is None:
            return {"type": "function", "function": {"name": call.name, "arguments": args}}
        return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": args}}

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant",
                               "content": self.text["content"].getvalue() or None,
                               "reasoning_content": self.text["reasoning_content"].getvalue() or None}
        if self.calls:
            msg["tool_calls"] = [c if type(c) is dict else self._call_dict(c) for c in self.calls]
        if self.errors:
            msg["parse_error"] = self.errors[0] if len(self.errors) == 1 else {**self.errors[0],
                                                                                "more": self.errors[1:]}
        if self.warnings:
            msg["parse_warnings"] = list(self.warnings)
        return msg


def _args_json(text: str, fmt: ValueFormat) -> tuple[str, bool]:
    """JSON for arguments written in the template's format ``fmt``, or as a Python dict (a JSON
    call whose arguments a template prints as a dict's repr); and whether they were Python."""
    try:
        return to_json_text(text, fmt), False
    except (ValueError, SyntaxError):
        if fmt.kind.startswith("python"):
            raise
        return to_json_text(text, PYTHON), True


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
