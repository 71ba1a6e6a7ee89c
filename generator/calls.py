"""Tool calls and tool sections from the call skeleton the analysis learned (literal parts, name,
id, index, arguments), and the guards that start them.

JSON-object calls between literals are read by :class:`~chat_autoparser.generator.json_call.JsonCall`; every
other format through its exact skeleton, with tagged arguments as units typed later by the
tool's schema, and channel headers in any attribute order.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> tool_guards(analyze_template("templates/chatml-think.jinja").tool_call_structure)
    ('<tool_call>',)
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

from chat_autoparser.analyzer.markers import is_marker, pairs, tokenize
from chat_autoparser.analyzer.structures import FunctionFormat, Part, ToolCallStructure

from .json_call import JsonCall, JsonCalls
from .peg import NEED, Capture, Driven, Empty, Input, Lit, Marker, Noted, Opt, Parser, Repeat, Run, Seq, Until
from .plan import ID, JSON, LIT, NAME, CallPlan, Step, lit_step
from .recovery import Closer
from .skeleton import args_parser, first_piece, leads, literal, pieces, skeleton_call, stop_of


def first_literal(parts: Sequence[Part]) -> str:
    for p in parts:
        if p.kind == "lit" and p.text.strip():
            return p.text
        if p.kind != "lit":
            return ""
    return ""


def json_frame(ts: ToolCallStructure) -> tuple[str, str] | None:
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


# Keys models use for a call's name and arguments, besides the ones the template writes.
NAME_KEYS = ("name",)
ARGS_KEYS = ("arguments", "parameters")


def json_calls(ts: ToolCallStructure) -> bool:
    """Whether calls are JSON objects between literals (read leniently by :class:`JsonCalls`)."""
    return json_frame(ts) is not None and ts.function_format in (FunctionFormat.JSON_OBJECT,
                                                                 FunctionFormat.NAME_AS_KEY)


def json_section_markers(ts: ToolCallStructure) -> tuple[str, str]:
    """The section's own markers around the calls, without the JSON array's brackets the
    template writes with them (``[TOOL_CALLS][`` → ``[TOOL_CALLS]``): models write an array or
    not, whatever the template does."""
    start, end = ts.tool_section_start, ts.tool_section_end
    if start.rstrip().endswith("["):
        start = start.rstrip()[:-1]
        if end.lstrip().startswith("]"):
            end = end.lstrip()[1:]
    return start, end


def section_end(ts: ToolCallStructure) -> str:
    """What closes the tool section after the calls the section parser reads (for JSON calls,
    without the array's bracket, which they read themselves)."""
    return json_section_markers(ts)[1] if json_calls(ts) else ts.tool_section_end


def _json_call(ts: ToolCallStructure) -> tuple[Parser, Marker | None, Marker | None]:
    """(one call object, the frame's opening marker, its closing marker)."""
    frame = json_frame(ts)
    assert frame is not None
    # broken arguments run up to the call's own closing brace and what follows it
    closing = ["}" + frame[1]] if frame[1].strip() else []
    stops = [Marker.of(x) for x in (*closing, frame[1], ts.call_separator, ts.tool_section_end) if x.strip()]
    if ts.function_format == FunctionFormat.JSON_OBJECT:
        wrappers = re.findall(r'"([^"]+)"\s*:\s*\{', ts.call_parts[0].text)  # ({"function": {"name": ...)
        # keys the template writes, and the OpenAI call object's own (``"type": "function"``)
        own = [*re.findall(r'"([^"]+)"\s*:', "".join(p.text for p in ts.call_parts)), "type", "id", "index"]
        inner = JsonCall(dict.fromkeys((ts.name_field, *NAME_KEYS)), dict.fromkeys((ts.args_field, *ARGS_KEYS)),
                         ts.id_field, stops=stops, wrappers=wrappers, own_keys=own)
    else:
        inner = JsonCall((), (), "", name_as_key=True, stops=stops)
    return (inner, Marker.of(frame[0]) if frame[0].strip() else None,
            Marker.of(frame[1]) if frame[1].strip() else None)


def json_plan(ts: ToolCallStructure) -> CallPlan | None:
    """The canonical form of a JSON-object call, read whole in one-shot parsing (see
    :mod:`chat_autoparser.generator.plan`): the template's own keys and layout, the name (and id) between the
    quotes the template writes."""
    parts = ts.call_parts
    frame = json_frame(ts)
    if ts.function_format != FunctionFormat.JSON_OBJECT or frame is None:
        return None
    steps: list[Step] = []
    slots = ("name", "id")
    for i, p in enumerate(parts):
        before = i > 0 and parts[i - 1].kind in slots
        after = i + 1 < len(parts) and parts[i + 1].kind in slots
        if p.kind == "lit" and i == len(parts) - 1 and not frame[1].strip():
            # the object's closing brace ends the call (whitespace after it is not the call's)
            text = p.text.lstrip()
            steps.append((LIT, (text[:len(text) - len(frame[1])], True, False)))
        elif p.kind == "lit":
            steps.append(lit_step(p.text, before, after))
        elif p.kind in slots and parts[i - 1].text.endswith('"') and parts[i + 1].text.startswith('"'):
            steps.append((NAME if p.kind == "name" else ID, Until([Marker('"')], to_end=False)))
        elif p.kind == "args":
            steps.append((JSON, None))
        else:
            return None
    return CallPlan(steps, json_strings=True)


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


class ChannelHeader(Driven):
    """A call header in any attribute order: the text up to ``end``, in which ``recipient``
    followed by the function name must occur, and none of ``fences`` (the markers that open a
    header or close a call: a header holding one runs over a message into the next)."""

    def __init__(self, recipient: str, end: str, fences: Sequence[str] = ()) -> None:
        self.recipient, self.end = recipient, end
        self.fences = tuple(f for f in fences if f and f != end)

    def run(self, inp: Input, pos: int) -> Run:
        while True:
            j = inp.find(self.end, pos)
            if j >= 0:
                break
            if inp.eof:
                return inp.fail(pos, f"expected {self.end!r}")
            yield NEED
        header = inp.get(pos, j)
        found = [(k, f) for f in self.fences if (k := header.find(f)) >= 0]
        if found:
            k, fence = min(found)
            return inp.fail(pos + k, f"{fence!r} inside a call header")
        recipient = self.recipient
        k = header.find(recipient)
        if k < 0:  # written without the namespace (``to=get_weather`` for ``to=functions.get_weather``)
            recipient = re.sub(r"[A-Za-z_][A-Za-z0-9_]*\.$", "", recipient)
            k = header.find(recipient) if recipient else -1
        if k < 0:
            return inp.fail(pos, f"no {self.recipient!r} in the header")
        m = re.match(r"[A-Za-z0-9_.\-]+", header[k + len(recipient):])
        if not m:
            return inp.fail(pos + k, "no function name after the recipient")
        inp.events += [("open", "tool_name"), ("chunk", "tool_name", m.group(0)), ("close", "tool_name")]
        inp.chunks += 1
        return j + len(self.end)


def channel_call(ts: ToolCallStructure, parts: tuple[str, str, str, str], fences: Sequence[str] = ()) -> Parser:
    """A call in a channel format, its header attributes in any order; the header holds none
    of ``fences`` (the markers that end a message), its own channel marker or the call's closer."""
    recipient, channel, end, close = parts
    args = args_parser(ts, [Marker.of(close)] if close.strip() else [])
    after = Closer(Marker.of(close)) if close.strip() else Empty()
    header = ChannelHeader(recipient, end, (channel, close.strip(), *fences))
    return Capture("tool_call", Seq(Lit(channel), header, args, after), where=True)


def tool_guards(ts: ToolCallStructure) -> tuple[str, ...]:
    """Literals that start a tool section (section start, else the call's first literal). Calls
    written as bare JSON objects have none: they are looked for where the format puts them
    (:func:`bare_json_calls`)."""
    if json_calls(ts):
        start = json_section_markers(ts)[0]
        frame = json_frame(ts)[0]
        lead = start if start.strip() else frame
        return tuple(g for g in Marker.of(lead).first() if g) if lead.strip() else ()
    if ts.tool_section_start.strip():
        return leads(ts.tool_section_start)
    lead = first_literal(ts.call_parts)
    before_name = len(ts.call_parts) > 1 and ts.call_parts[0].kind == "lit" and ts.call_parts[1].kind == "name"
    return leads(lead, before_name) if lead.strip() else ()


def without_opener(ts: ToolCallStructure) -> ToolCallStructure | None:
    """The calls as a model writes them without their outermost opener: without the section's
    opener (``<function=...>`` for ``<tool_call><function=...>``), or, where the template folds
    that opener into each call's first literal, without its first marker. None when nothing
    distinctive would start them then."""
    if json_calls(ts) or not ts.call_parts or ts.call_parts[0].kind != "lit":
        return None
    if ts.tool_section_start.strip():
        bare = replace(ts, tool_section_start="", tool_section_end="")
    else:
        ps = [p for p in pieces(ts.call_parts[0].text) if p[1]]
        if len(ps) < 2 or not ps[0][2]:
            return None
        text = ts.call_parts[0].text
        rest = text[text.index(ps[1][1], text.index(ps[0][1]) + len(ps[0][1])):]
        parts = [Part("lit", rest), *ts.call_parts[1:]]
        last = parts[-1].text if len(parts) > 1 and parts[-1].kind == "lit" else ""
        closer = next((c for _, c, marker in reversed(pieces(last)) if marker and pairs(ps[0][1], c)), "")
        if closer:  # the opener's own closer goes with it: it ends the calls, if written at all
            k = last.rindex(closer)
            parts[-1] = Part("lit", last[:k].rstrip() + last[k + len(closer):])
        bare = replace(ts, call_parts=tuple(parts), tool_section_end=closer)
    piece = first_piece(bare.call_parts[0].text)
    return bare if piece and (is_marker(piece) or piece.startswith("<")) and piece not in tool_guards(ts) else None


def call_guards(ts: ToolCallStructure) -> tuple[str, ...]:
    """What starts a call written without its outermost opener (see :func:`without_opener`)."""
    bare = without_opener(ts)
    return leads(bare.call_parts[0].text) if bare is not None else ()


def bare_json_calls(ts: ToolCallStructure) -> bool:
    """Calls are JSON objects with no marker before them (``{"name": ...}`` as the whole output)."""
    return json_calls(ts) and not tool_guards(ts)


def _json_section(ts: ToolCallStructure, parallel: bool) -> Parser:
    call, frame_open, frame_close = _json_call(ts)
    start, end = json_section_markers(ts)
    sep = ts.call_separator.strip()
    calls = JsonCalls(call, frame_open, frame_close, max_calls=None if parallel else 1,
                      array=start != ts.tool_section_start, sep=sep if sep in (",", ";", "") else None,
                      plan=json_plan(ts))
    seq: list[Parser] = [literal(start, raw_before=True, raw_after=False)] if start.strip() else []
    seq.append(calls)
    if end.strip() and not turn_end_like(ts):  # may be cut off with the stop token
        seq.append(literal(end, raw_before=False, raw_after=False, optional=True))
    return Seq(*seq)


def tool_section(ts: ToolCallStructure, parallel: bool, *, with_start: bool = True,
                 turn_ends: Sequence[str] = (), names: frozenset[str] | None = None) -> Parser:
    """The tool section: its opener (unless ``with_start`` is off: calls written without it, see
    :func:`without_opener`), the calls, its closer (which may be missing). ``turn_ends``:
    markers that end the turn, which also end a call left open."""
    if not with_start:
        bare = without_opener(ts)
        assert bare is not None, "no call guards: nothing starts calls without their opener"
        ts = bare
    if json_calls(ts):
        return _json_section(ts, parallel)
    end = ts.tool_section_end if not with_start or not turn_end_like(ts) else ""
    opener = first_piece(first_literal(ts.call_parts)) if first_literal(ts.call_parts).strip() else ""
    outer = [m for m in (stop_of(ts.call_separator, loose=True), stop_of(end, loose=True),
                         Marker(opener, "", "", True) if opener else None,
                         *(stop_of(x, loose=True) for x in turn_ends)) if m is not None]
    call = skeleton_call(ts, outer, names)
    sep = literal(ts.call_separator, raw_before=False, raw_after=False) if ts.call_separator.strip() else None
    closers = leads(end) if end.strip() else ()
    calls = Repeat(call, sep, min=1, max=None if parallel else 1, closers=closers,
                   skip_ws=not ts.call_separator.strip())
    seq: list[Parser] = []
    if ts.tool_section_start.strip():
        seq.append(literal(ts.tool_section_start, raw_before=False, raw_after=False))
    seq.append(calls)
    if end.strip() and not with_start:  # (the opener's closer, written or not)
        seq.append(Opt(literal(end, raw_before=False, raw_after=False)))
    elif end.strip():  # may be cut off with the stop token
        seq.append(literal(end, raw_before=False, raw_after=False, optional=True))
    return Seq(*seq)


class Sectioned(Noted):
    """A tool section: a ``("section", start)`` event when ``p`` reads one (the assembler notes a
    second section in one message: the template writes all calls in one)."""

    def __init__(self, p: Parser) -> None:
        super().__init__(p, "")

    def _ended(self, inp: Input, pos: int, end: int) -> int:
        if end > pos:
            inp.events.append(("section", pos))
        return end


def turn_end_like(ts: ToolCallStructure) -> bool:
    """A section end that closes nothing the section opened (``<|tool_response>``, ``<|eom_id|>``)
    marks the end of a tool-call turn rather than of the section."""
    end = [t for t in tokenize(ts.tool_section_end) if is_marker(t)]
    start = [t for t in tokenize(ts.tool_section_start) if is_marker(t)]
    return bool(end) and not any(pairs(a, b) for a in start for b in end)


def tool_stops(ts: ToolCallStructure, enabled: bool) -> list[Marker]:
    if not (enabled and ts.supports_tools and ts.call_parts):
        return []
    return [Marker(g, separator_ws(ts)) for g in tool_guards(ts) if g and g.strip() == g]


def separator_ws(ts: ToolCallStructure, with_start: bool = True) -> str:
    """The whitespace a template writes between content and the calls: it belongs to the calls
    (content parsed back renders the same turn). ``with_start`` off: before calls written
    without the section's opener."""
    sep = ts.content_separator
    if sep and not sep.strip() and with_start:
        return sep
    src = ts.tool_section_start if ts.tool_section_start.strip() and with_start else \
        (first_literal(ts.call_parts) or "")
    before = Marker.of(src).before if src.strip() else ""
    return before or (sep if sep and not sep.strip() else "")
