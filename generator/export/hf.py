"""Hugging Face ``response_template`` (read by transformers' ``parse_response`` and
``ResponseParser``, seed 004) from the analysis.

Fields: ``thinking`` between the reasoning markers (the field name of seed 004's examples, the
one vLLM's reader of response templates requires; a client's message holds it as
``reasoning_content`` too, which templates read alike); ``content`` as the implicit
(leftover) field, up to the turn's end (or between the content markers when the template wraps
content); ``tool_calls`` from the call skeleton: an opener regex (the literals before the
arguments, the name and id captured as named groups), the arguments parsed as ``json`` (one JSON
value) or ``xml-inline`` (one unit per argument), and the literals after them as the closer.
Calls written as one JSON object are parsed whole and reshaped by a ``transform`` that picks the
name and arguments by their keys (``transform_each`` over a JSON array section).
``start_anchor`` is the assistant header, so a prompt that opens reasoning is seen in ``prefix``.

What the format cannot say raises :class:`NotExpressible` with the reason (Python call syntax, a
name written as a JSON key, arguments as a JSON string, values in a dialect, nested units, ...).

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> rt = response_template(analyze_template("templates/chatml-think.jinja"))
    >>> rt["fields"]["thinking"]["open"], rt["start_anchor"]
    ('<think>', '<|im_start|>assistant\\n')
"""

from __future__ import annotations


import json
import re
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.formatter import format_call
from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.analyzer.structures import ContentMode, Part, ReasoningMode, TemplateAnalysis, ToolCallStructure
from chat_autoparser.analyzer.walk import At, SkeletonVisitor, walk

from ..calls import json_calls, json_frame, json_section_markers
from ..message import turn_stop_markers
from ...errors import NotExpressible
from .frame import call_frame, tool_names

THINKING = "thinking"  # the reasoning's field (seed 004; vLLM's "hf" parsers require this name)

FMT = "hf"
WS = re.compile(r"\s+")
NAME_CHARS = r"[A-Za-z0-9_.\-]+"
TEXT = {"content": "text"}
TRANSFORM_KEYS = re.compile(r"\w+")


def lit_regex(text: str) -> str:
    """A literal as a regex: its characters, with any whitespace where it writes whitespace (the
    regions strip their text, so whitespace on either side is not part of a value)."""
    pieces = WS.split(text)
    return r"\s*".join(re.escape(p) for p in pieces)


def _alternation(names: Sequence[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) if names else NAME_CHARS


class _Opener(SkeletonVisitor[str]):
    """The parts of a call up to its arguments as a regex: the first name and the id are captured."""

    def __init__(self, names: Sequence[str], name_written: bool, capture: bool = True) -> None:
        self.names = _alternation(names)
        self.name_written = name_written  # else the name is inside the id (``functions.f:0``)
        self.capture = capture  # False: the same regex without groups (to look ahead for a call)
        self.captured: set[str] = set()

    def group(self, name: str, body: str) -> str:
        return f"(?P<{name}>{body})" if self.capture else f"(?:{body})"

    def lit(self, part: Part, at: At) -> str:
        return lit_regex(part.text)

    def name(self, part: Part, at: At) -> str:
        if "name" in self.captured:  # written twice (a recipient header and the call): the same name
            return "(?P=name)" if self.capture else f"(?:{self.names})"
        self.captured.add("name")
        return self.group("name", self.names)

    def id(self, part: Part, at: At) -> str:
        self.captured.add("id")
        if self.name_written:
            return self.group("id", r"[^\s<>\"']+?")
        self.captured.add("name")
        return self.group("id", rf"(?:[A-Za-z_]\w*\.)?{self.group('name', self.names)}(?:[:_-]\d+)?")

    def index(self, part: Part, at: At) -> str:
        return r"\d+"

    def typed(self, part: Part, at: At) -> str:
        return "(?:" + "|".join(lit_regex(t) for t in sorted({t for _, t in part.by_type}, key=len, reverse=True)) + ")"


class _ArgUnit(SkeletonVisitor[str]):
    """One argument unit (``<parameter=k>v</parameter>``) as xml-inline's ``tag_pattern``."""

    def lit(self, part: Part, at: At) -> str:
        return lit_regex(part.text)

    def key(self, part: Part, at: At) -> str:
        stop = at.next.text.strip()[:1] if at.next is not None and at.next.kind == "lit" else ""
        return rf"(?P<key>[^\s{re.escape(stop)}<>]+)" if stop else r"(?P<key>\w+)"

    def value(self, part: Part, at: At) -> str:
        return r"(?P<value>.*?)" if at.next is not None else r"(?P<value>.*?)(?=\Z|{sep})"

    def typed(self, part: Part, at: At) -> str:
        return "(?:" + "|".join(lit_regex(t) for t in sorted({t for _, t in part.by_type}, key=len, reverse=True)) + ")"


def _uncaptured(regex: str) -> str:
    """``regex`` with its named groups made plain groups (a close pattern captures nothing)."""
    return re.sub(r"\(\?P<\w+>", "(?:", re.sub(r"\(\?P=\w+\)", NAME_CHARS, regex))


def _fail(message: str, analysis: TemplateAnalysis) -> NotExpressible:
    return NotExpressible(message, template=analysis.template, fmt=FMT)


def _stops(analysis: TemplateAnalysis) -> list[str]:
    """What ends the turn: its stop markers, and the end of turn / final suffix as written."""
    texts = turn_stop_markers(analysis) | {t.strip() for t in (analysis.end_of_turn, analysis.final_suffix)}
    return sorted((t for t in texts if t), key=len, reverse=True)


def _ahead(*regexes: str) -> str:
    """A zero-width match where one of ``regexes`` begins (or at the end)."""
    return "(?=" + "|".join([r for r in regexes if r] + [r"\Z"]) + ")"


# --------------------------------------------------------------------------- calls as one JSON object

def _path_to(obj: Any, wanted: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    if obj == wanted and path:
        return path
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = _path_to(v, wanted, path + (k,))
            if found is not None:
                return found
    return None


def _json_call_paths(ts: ToolCallStructure, analysis: TemplateAnalysis) -> dict[str, tuple[str, ...]]:
    """Where the name, the arguments and the id sit in a call's JSON object (key paths), found by
    writing a sample call through the skeleton and reading it back as JSON."""
    pre, post = json_frame(ts) or ("", "")
    sample_args = {"x_arg": 1}
    text = format_call(ts, "x_name", sample_args, "x_id", 0)
    body = text[len(pre):len(text) - len(post)] if post else text[len(pre):]
    try:
        obj = json.loads(body)
    except ValueError:
        raise _fail("a call's JSON object is not valid JSON as the template writes it", analysis) from None
    paths = {k: _path_to(obj, v) for k, v in (("name", "x_name"), ("arguments", sample_args), ("id", "x_id"))}
    if paths["name"] is None:
        raise _fail("the tool's name is written as a JSON key: a transform cannot turn a key into a value",
                    analysis)
    if paths["arguments"] is None:
        if _path_to(obj, json.dumps(sample_args)) is not None or any(isinstance(v, str) and "x_arg" in v
                                                                     for v in obj.values()):
            raise _fail("arguments are written as a JSON string inside the call's object: the json parser "
                        "returns the string, not the arguments", analysis)
        raise _fail("the arguments are not found in the call's JSON object", analysis)
    bad = [p for p in paths.values() if p is not None and not all(TRANSFORM_KEYS.fullmatch(k) for k in p)]
    if bad:
        raise _fail(f"a key of the call's object ({'.'.join(bad[0])!r}) is not a transform placeholder name",
                    analysis)
    return {k: v for k, v in paths.items() if v is not None}


def _call_transform(paths: Mapping[str, tuple[str, ...]], root: str) -> dict[str, Any]:
    def ref(key: str) -> str:
        return "{" + ".".join(((root,) if root else ()) + paths[key]) + "}"
    out: dict[str, Any] = {}
    if "id" in paths:
        out["id"] = ref("id")
    out.update({"type": "function", "function": {"name": ref("name"), "arguments": ref("arguments")}})
    return out


def _json_tool_field(ts: ToolCallStructure, analysis: TemplateAnalysis, leave: bool = False) -> dict[str, Any]:
    pre, post = json_frame(ts) or ("", "")
    paths = _json_call_paths(ts, analysis)
    start, end = json_section_markers(ts)
    if ts.tool_section_start.rstrip().endswith("["):  # one JSON array of calls
        field: dict[str, Any] = {"content": "json", "transform_each": True, "transform": _call_transform(paths, "")}
        if start.strip():
            field["open"] = start.strip()
        else:
            field["open_pattern"] = r"(?=\[\s*\{)"
        closer = end.strip()
        if closer:
            field["close"] = closer
        elif _stops(analysis):
            field["close"] = _stops(analysis)
        return field
    first_key = re.escape(json.dumps(ts_first_key(ts, pre)))
    bare = rf"\{{\s*{first_key}"  # a call written as a bare object starts so
    opener = lit_regex(pre.strip()) if pre.strip() else f"(?={bare})"
    if start.strip():
        opener = rf"(?:{lit_regex(start.strip())}\s*)?" + opener
    field = {"open_pattern": opener, "content": "json", "repeats": True, "transform": _call_transform(paths, "content")}
    section_end = rf"(?:\s*{lit_regex(end.strip())})?" if end.strip() and not leave else ""
    if post.strip():
        field["close_pattern"] = lit_regex(post.strip()) + section_end
    else:  # the object ends at a brace followed by the next call, the section's or the turn's end
        stops = [re.escape(x) for x in _stops(analysis)] + ([lit_regex(end.strip())] if end.strip() and leave else [])
        field["close_pattern"] = r"(?<=\})" + section_end + _ahead(*(rf"\s*{x}" for x in [bare] + stops))
    return field


def ts_first_key(ts: ToolCallStructure, pre: str) -> str:
    """The first key of a call's JSON object (what a bare object starts with)."""
    first = ts.call_parts[0].text[len(pre):] if ts.call_parts and ts.call_parts[0].kind == "lit" else ""
    m = re.match(r'\s*\{\s*"([^"]*)"', first)
    return m.group(1) if m else ""


# --------------------------------------------------------------------------- calls cut at their arguments

def _value_parser(ts: ToolCallStructure, analysis: TemplateAnalysis) -> dict[str, Any] | None:
    formats = dict(ts.value_formats)
    if any(f.kind == "units" for f in formats.values()):
        raise _fail("nested values are written as argument units again: xml-inline reads one level", analysis)
    # raw values are typed by the tools' schemas, which read Python's True/False/None too
    odd = sorted({f.kind for t, f in formats.items()
                  if f.kind != "json" and not (f.kind == "python_str" and t in ("boolean", "null"))})
    if odd:
        raise _fail(f"argument values are written in a non-JSON form ({', '.join(odd)})", analysis)
    string = formats.get("string")
    if string is not None and not string.raw_strings:  # strings quoted as JSON: values are JSON
        return {"name": "json", "args": {"allow_non_json": True}}
    return None  # raw text, typed by the tools' schemas (parse_response's tools=)


def _framed_tool_field(ts: ToolCallStructure, analysis: TemplateAnalysis, names: Sequence[str],
                       leave: bool = False) -> dict[str, Any]:
    frame = call_frame(ts, FMT, analysis.template)
    opener_v = _Opener(names, any(p.kind == "name" for p in ts.call_parts))
    opener = "".join(walk(frame.before, opener_v)).removeprefix(r"\s*")
    if not opener:
        raise _fail("a call starts with its arguments: there is no opener to find it by", analysis)
    if "name" not in opener_v.captured:
        raise _fail("calls do not write the tool's name", analysis)
    start, end = ts.tool_section_start.strip(), ts.tool_section_end.strip()
    if start:
        opener = rf"(?:{lit_regex(start)}\s*)?" + opener
    field: dict[str, Any] = {"open_pattern": opener, "repeats": True}
    if ts.args_mode == "tagged":
        if not ts.arg_parts:
            raise _fail("tagged arguments without an argument skeleton", analysis)
        unit = "".join(walk(ts.arg_parts, _ArgUnit())).replace("{sep}", lit_regex(ts.arg_separator.strip()) or r"\s")
        args: dict[str, Any] = {"tag_pattern": unit.removeprefix(r"\s*")}
        parser = _value_parser(ts, analysis)
        if parser is not None:
            args["value_parser"] = parser
        field.update(content="xml-inline", content_args=args)
    elif ts.args_format.kind == "json":
        field["content"] = "json"
    else:
        raise _fail(f"the arguments are written as {ts.args_format.kind}, not JSON", analysis)
    sep = ts.call_separator.strip()
    closer = lit_regex(frame.closer.strip())
    extra = "".join(rf"(?:\s*{lit_regex(x)})?" for x in (sep, end) if x and not closer.endswith(lit_regex(x))
                    and not leave)
    if closer:
        field["close_pattern"] = closer + extra
    else:  # the arguments run to the next call's opener, the section's end or the turn's end
        lookahead = "".join(walk(frame.before, _Opener(names, opener_v.name_written, capture=False)))
        field["close_pattern"] = _ahead(lookahead.removeprefix(r"\s*"), *(lit_regex(x) for x in (sep, end) if x),
                                        *(re.escape(x) for x in _stops(analysis)))
    transform: dict[str, Any] = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    if "id" in opener_v.captured:
        transform = {"id": "{id}", **transform}
    field["transform"] = transform
    return field


def tool_calls_field(analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]] | None = None, *,
                     leave: bool = False) -> dict[str, Any]:
    """The ``tool_calls`` field (NotExpressible when the format cannot say it). ``leave``: the
    markers that may follow a call (:func:`after_calls`) are left to another field: a closer
    pattern that ends in an optional marker is decided by transformers' streaming before the
    marker arrives, which then stays as text."""
    ts = analysis.tool_call_structure
    call_frame(ts, FMT, analysis.template)  # the common refusals (no calls, Python syntax, ...)
    if json_calls(ts):
        return _json_tool_field(ts, analysis, leave)
    return _framed_tool_field(ts, analysis, tool_names(tools), leave)


def after_calls(ts: ToolCallStructure) -> list[str]:
    """The markers that may follow a call's own closer: the separator between calls and the end
    of the section."""
    end = json_section_markers(ts)[1] if json_calls(ts) else ts.tool_section_end
    return [x.strip() for x in (ts.call_separator, end) if x.strip()]


# --------------------------------------------------------------------------- the template

def _anchor(analysis: TemplateAnalysis) -> dict[str, str]:
    header = analysis.assistant_start
    if header.strip():
        return {"start_anchor": header + _after_header(analysis)}
    forced = any(s.reasoning_mode == ReasoningMode.FORCED_OPEN for s in analysis.thinking_settings)
    if forced:
        raise _fail("the prompt opens reasoning but there is no assistant header to anchor the prefix on",
                    analysis)
    return {"start_anchor_pattern": r"\Z"}  # nothing of the prompt belongs to the message


def _after_header(analysis: TemplateAnalysis) -> str:
    """What every setting's generation prompt writes after the assistant header and before any
    reasoning marker (a tag of its own, a stray end-of-text token): the prompt's, not the message's."""
    prompts = analysis.generation_prompts()
    header = analysis.assistant_start
    if not prompts or not all(p.startswith(header) for p in prompts):
        return ""
    tails = [p[len(header):] for p in prompts]
    common = tails[0]
    for tail in tails[1:]:  # (whole tokens: "<" of "<think>" and "</think>" is no text of its own)
        common = common[:common_prefix_len(common, tail, tokens=True)]
    cs = analysis.content_structure
    for marker in (cs.reasoning_start.strip(), cs.reasoning_end.strip(), cs.content_start.strip()):
        for tail in tails if marker else ():  # (nor the start of a marker one of them writes)
            if 0 <= (i := tail.find(marker)) < len(common):
                common = common[:i]
    return common if common.strip() else ""


def response_template(analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None,
                      with_tools: bool = True) -> dict[str, Any]:
    """The response template for ``analysis`` (tool names narrowed to ``tools`` when given;
    without ``with_tools`` no ``tool_calls`` field). Raises NotExpressible with the reason."""
    cs = analysis.content_structure
    fields: dict[str, Any] = {}
    rs, re_ = cs.reasoning_start.strip(), cs.reasoning_end.strip()
    if re_ and not rs:
        raise _fail("reasoning has no opening marker (the prompt opens it implicitly): a region needs an "
                    "opener", analysis)
    stops = _stops(analysis)
    if rs and re_:  # (reasoning cut off by the turn's end ends there)
        fields[THINKING] = {"open": rs, "close": [re_] + [x for x in stops if x != re_], **TEXT}
    ts = analysis.tool_call_structure
    leftover = not cs.content_start.strip()  # content is the text no other field reads
    if with_tools and ts.supports_tools and ts.call_parts:
        fields["tool_calls"] = tool_calls_field(analysis, tools, leave=leftover)
    if cs.content_mode == ContentMode.WRAPPED_WITH_REASONING:
        raise _fail("content is wrapped only when reasoning is written: two forms of one field", analysis)
    if cs.content_start.strip():
        content: dict[str, Any] = {"open": cs.content_start.strip(), **TEXT}
        if cs.content_end.strip():
            content["close"] = cs.content_end.strip()
        else:  # wrapped content runs to the calls (what leads to them) or the turn's end
            calls = [lit_regex(x.strip()) for x in (ts.content_separator, ts.tool_section_start) if x.strip()]
            opener = fields.get("tool_calls", {}).get("open_pattern")
            ends = calls + [re.escape(x) for x in stops]
            if ends or opener:
                content["close_pattern"] = "|".join(ends + ([f"(?={_uncaptured(opener)})"] if opener else []))
    else:  # the leftover text; pieces around calls are joined; a stray reasoning end is not text, nor the
        # markers after a call (they close an empty piece)
        content = {**TEXT, "repeats": True, "join": ""}
        after = after_calls(ts) if "tool_calls" in fields else []
        closers = list(dict.fromkeys(stops + ([re_] if re_ and re_ not in stops else []) + after))
        if closers:
            content["close"] = closers
    fields["content"] = content
    return {"defaults": {"role": "assistant"}, **_anchor(analysis), "fields": fields}
