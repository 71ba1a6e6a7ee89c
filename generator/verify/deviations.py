"""Oracle 5, deviations: generic ways models depart from what their template renders.

Each :class:`Perturbation` takes a rendered output that our parser reads correctly (a passing
render → parse fixed point, :mod:`chat_autoparser.generator.verify.fixed_point`) and writes it the way a model
might instead: whitespace between markers, the reasoning start written again, JSON compact or
pretty, one object where the template writes an array, a key synonym, a missing closer, Python
quoting... Every perturbation is derived from the analysis (the markers, the call skeleton, the
value formats), never from a model name, and applies only where the format admits it.

The perturbed output must parse to the same message, and a strict parse must refuse it unless
it keeps the template's form (whitespace and JSON layout are never refused). A second family,
the *precision* checks, goes the other way: prose and code that merely contain call-like text
must stay content, verbatim.

Example::

    >>> from chat_autoparser.analyzer import analyze_template, load_template
    >>> from chat_autoparser.generator.verify.fixed_point import fixed_point
    >>> t = load_template("templates/chatml-think.jinja")
    >>> a = analyze_template(t)
    >>> out = Output.of(a, fixed_point(t, a, "tool_call"))
    >>> [d.perturbation for d in deviations(out)][:3]
    ['ws_added_between_markers', 'ws_removed_between_markers', 'json_compact']
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Callable, Iterator

from chat_autoparser.errors import ParseError
from chat_autoparser.analyzer.formatter import format_call, format_tool_calls
from chat_autoparser.analyzer.markers import is_marker, tokenize
from chat_autoparser.analyzer.structures import FunctionFormat, ReasoningMode, TemplateAnalysis, ToolCallStructure

from ..calls import section_end, turn_end_like
from ..message import split_turn_end
from ..params import generate_parser
from ..skeleton import own_quoted, quotes_apart
from ..parser import MessageParser
from .fixed_point import CONTENT, REASONING, RT_TOOLS, FixedPoint

Message = dict[str, Any]


# --------------------------------------------------------------------------- the outputs

@dataclass(frozen=True)
class Output:
    """One rendered output that parses right: the starting point of every perturbation."""

    analysis: TemplateAnalysis
    scenario: str
    text: str        # what the model generates, as the template renders it
    message: Message  # what the parser reads from it (equal to the scenario's message)
    enable_thinking: bool
    with_tools: bool

    @classmethod
    def of(cls, analysis: TemplateAnalysis, fp: FixedPoint) -> "Output":
        return cls(analysis, fp.scenario, fp.generated, fp.parsed, fp.enable_thinking, fp.with_tools)

    @property
    def ts(self) -> ToolCallStructure:
        return self.analysis.tool_call_structure

    @cached_property
    def calls(self) -> list[tuple[str, Any, str | None]]:
        out = []
        for c in self.message.get("tool_calls") or []:
            out.append((c["function"]["name"], json.loads(c["function"]["arguments"]), c.get("id")))
        return out

    @cached_property
    def block(self) -> tuple[int, int] | None:
        """Where the tool calls stand in ``text``, written by the formatter (None when the
        formatter does not write them as the template did)."""
        if not self.calls:
            return None
        block = self.format(self.ts)
        i = self.text.find(block)
        return (i, i + len(block)) if i >= 0 and self.text.find(block, i + 1) < 0 else None

    def format(self, ts: ToolCallStructure, calls: list[tuple[str, Any, str | None]] | None = None) -> str:
        calls = self.calls if calls is None else calls
        return format_tool_calls(ts, [{"id": i, "function": {"name": n, "arguments": a}} for n, a, i in calls])

    def with_block(self, block: str) -> str:
        """The output with its call block replaced."""
        assert self.block is not None
        a, b = self.block
        return self.text[:a] + block + self.text[b:]

    @cached_property
    def parser(self) -> MessageParser:
        """The parser of the request the output was rendered for."""
        return generate_parser(self.analysis, tools=RT_TOOLS if self.with_tools else None,
                               enable_thinking=self.enable_thinking).parser

    @property
    def forced_open(self) -> bool:
        return self.parser.mode == ReasoningMode.FORCED_OPEN


@dataclass(frozen=True)
class Deviation:
    """One perturbed output and the message it must parse to; ``strict``: whether a strict
    parse must refuse it (a form the template does not write)."""

    perturbation: str
    scenario: str
    text: str
    expected: Message
    original: str
    strict: bool = True


# --------------------------------------------------------------------------- perturbations

@dataclass(frozen=True)
class Perturbation:
    name: str
    what: str  # what the model does differently, in one line
    make: Callable[[Output], list[str]]  # the perturbed outputs (none: it does not apply)
    # the expected message when it is not the original one (precision checks)
    expect: Callable[[Output, str], Message] | None = None
    # the perturbed text is still the template's form for ``strict`` parsing: whitespace
    # around structure and inside JSON, JSON key order, and text that stays content
    canonical: bool = False


def _json_format(ts: ToolCallStructure) -> bool:
    return ts.function_format in (FunctionFormat.JSON_OBJECT, FunctionFormat.NAME_AS_KEY)


def _json_args(ts: ToolCallStructure) -> bool:
    return ts.args_mode == "whole" and ts.args_format.kind == "json" and not ts.args_format.raw_strings


# ---- whitespace

_BRACKET_EDGE = re.compile(r"^[\[{]|[\]}]$")


def _structural(tok: str) -> bool:
    """A token that is structure, not text: a marker, or JSON punctuation that opens or closes."""
    return is_marker(tok) or tok in "{}[]"


def _boundaries(block: str) -> list[tuple[int, int]]:
    """(start, end) of the whitespace (possibly empty) between two adjacent structural tokens
    of a call block: between two markers, or a marker and a JSON bracket."""
    toks = tokenize(block)
    pos, starts = [], 0
    for t in toks:
        pos.append(starts)
        starts += len(t)
    out = []
    i = 0
    while i < len(toks):
        if not _structural(toks[i]):
            i += 1
            continue
        j = i + 1
        while j < len(toks) and toks[j].isspace():
            j += 1
        if j < len(toks) and _structural(toks[j]) and (is_marker(toks[i]) or is_marker(toks[j])):
            out.append((pos[i] + len(toks[i]), pos[j]))
        i = j
    return out


def _ws_added(out: Output) -> list[str]:
    if out.block is None:
        return []
    block = out.text[out.block[0]:out.block[1]]
    cuts = _boundaries(block)
    if not cuts:
        return []
    pieces, last = [], 0
    for a, b in cuts:
        pieces += [block[last:b], "\n" if a == b else " "]
        last = b
    return [out.with_block("".join(pieces) + block[last:])]


def _ws_removed(out: Output) -> list[str]:
    if out.block is None:
        return []
    block = out.text[out.block[0]:out.block[1]]
    cuts = [(a, b) for a, b in _boundaries(block) if b > a]
    if not cuts:
        return []
    pieces, last = [], 0
    for a, b in cuts:
        pieces.append(block[last:a])
        last = b
    return [out.with_block("".join(pieces) + block[last:])]


def _indented(out: Output) -> list[str]:
    """Markup lines indented (a line that is only markers gets two spaces in front)."""
    if out.block is None or out.ts.function_format in (FunctionFormat.JSON_OBJECT, FunctionFormat.NAME_AS_KEY):
        return []
    block = out.text[out.block[0]:out.block[1]]
    lines = block.split("\n")
    if len(lines) < 3:
        return []
    changed = [("  " + ln) if ln.strip() and all(is_marker(t) or t.isspace() for t in tokenize(ln)) and i > 0
               else ln for i, ln in enumerate(lines)]
    return [out.with_block("\n".join(changed))] if changed != lines else []


# ---- reasoning

def _reasoning_start_again(out: Output) -> list[str]:
    start = out.analysis.content_structure.reasoning_start
    if not start.strip() or not out.forced_open or out.text.lstrip().startswith(start.strip()):
        return []
    return [start + out.text] + ([start.strip() + out.text] if not out.text[:1].isspace() else [])


def _ws_before_reasoning(out: Output) -> list[str]:
    start = out.analysis.content_structure.reasoning_start.strip()
    if not start or out.forced_open or not out.text.startswith(start):
        return []
    return ["\n" + out.text, " \n" + out.text]


def _reasoning_unclosed(out: Output) -> list[str]:
    """The reasoning block never closed, a call following it."""
    cs = out.analysis.content_structure
    end = cs.reasoning_end.strip()
    reasoning = out.message.get("reasoning_content")
    if not end or not reasoning or out.block is None:
        return []
    i = out.text.find(end)
    if i < 0 or i > out.block[0]:
        return []
    j = i + len(end)
    while j < out.block[0] and out.text[j] in " \t\r\n":
        j += 1
    return [out.text[:i].rstrip() + "\n" + out.text[j:]]


def _reasoning_closes_before_calls(out: Output) -> bool:
    """The output holds reasoning (the needle) that its end marker closes before the calls."""
    end = out.analysis.content_structure.reasoning_end.strip()
    if not end or out.block is None or REASONING not in (out.message.get("reasoning_content") or ""):
        return False
    at, close = out.text.find(REASONING), out.text.find(end)
    return 0 <= at < close < out.block[0] and end not in out.text[at:close]


def _draft_of(out: Output, fenced: bool) -> str:
    """What a model drafting the calls in its reasoning adds after the reasoning: the calls as
    the template writes them (a plan), or quoted in a fenced block with placeholder arguments."""
    if fenced:
        calls = [(n, {k: "..." for k in a} if isinstance(a, dict) else a, i) for n, a, i in out.calls]
        return " The format is:\n```\n" + out.format(out.ts, calls) + "\n```\nNow the real call."
    return " I will call:\n" + out.format(out.ts) + "\nThat is the plan."


def _drafted(out: Output, fenced: bool) -> str:
    at = out.text.find(REASONING) + len(REASONING)
    return out.text[:at] + _draft_of(out, fenced) + out.text[at:]


def _draft(fenced: bool) -> Callable[[Output], list[str]]:
    """The calls drafted inside reasoning that closes before the real ones (see ``_draft_of``)."""
    def make(out: Output) -> list[str]:
        return [_drafted(out, fenced)] if _reasoning_closes_before_calls(out) else []
    return make


def _fenced_draft_unclosed(out: Output) -> list[str]:
    """A call quoted in a fenced block inside reasoning that never closes, the real call after
    it: the quote is reasoning, the real call ends it."""
    if not _reasoning_closes_before_calls(out) or out.ts.function_format == FunctionFormat.MARKDOWN_CODE_BLOCK:
        return []  # (a fence is the template's own call format)
    return _reasoning_unclosed(replace(out, text=_drafted(out, fenced=True)))


def _with_draft(fenced: bool) -> Callable[[Output, str], Message]:
    """The original message with the draft added to its reasoning."""
    def expect(out: Output, perturbed: str) -> Message:
        reasoning = out.message["reasoning_content"].replace(REASONING, REASONING + _draft_of(out, fenced), 1)
        return {**out.message, "reasoning_content": reasoning}
    return expect


# ---- JSON call objects

def _call_objects(out: Output) -> list[tuple[int, int, dict[str, Any]]]:
    """(start, end, object) of every call's JSON object inside the block, in order."""
    if out.block is None or not _json_format(out.ts):
        return []
    a, b = out.block
    found, i = [], a
    dec = json.JSONDecoder()
    for _ in out.calls:
        i = out.text.find("{", i, b)
        if i < 0:
            return []
        try:
            obj, end = dec.raw_decode(out.text, i)
        except ValueError:
            return []
        if not isinstance(obj, dict):
            return []
        found.append((i, end, obj))
        i = end
    return found


def _rewrite_objects(out: Output, how: Callable[[dict[str, Any]], str]) -> list[str]:
    objs = _call_objects(out)
    if not objs:
        return []
    text, last, pieces = out.text, 0, []
    for a, b, obj in objs:
        pieces += [text[last:a], how(obj)]
        last = b
    new = "".join(pieces) + text[last:]
    return [new] if new != text else []


def _args_key(out: Output) -> str | None:
    ts = out.ts
    return ts.args_field if ts.function_format == FunctionFormat.JSON_OBJECT and ts.args_field else None


def _synonym(out: Output) -> list[str]:
    key = _args_key(out)
    if key is None:
        return []
    other = "parameters" if key == "arguments" else "arguments"
    return _rewrite_objects(out, lambda o: json.dumps({other if k == key else k: v for k, v in o.items()},
                                                      ensure_ascii=False))


def _args_as_string(out: Output) -> list[str]:
    key = _args_key(out)
    if key is None:
        return []
    return _rewrite_objects(out, lambda o: json.dumps(
        {k: json.dumps(v, ensure_ascii=False) if k == key and isinstance(v, dict) else v for k, v in o.items()},
        ensure_ascii=False))


def _args_as_python_dict(out: Output) -> list[str]:
    """Arguments written as a Python dict's repr (``{'city': 'Paris'}``, ``True``, ``None``): what
    a template that prints the arguments object writes."""
    key = _args_key(out)
    if key is None:
        return []

    def how(o: dict[str, Any]) -> str:
        args = o.get(key)
        if not isinstance(args, dict) or not args:
            return json.dumps(o, ensure_ascii=False)
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: "
                               + (repr(v) if k == key else json.dumps(v, ensure_ascii=False)) for k, v in o.items()) + "}"
    return _rewrite_objects(out, how)


def _reordered(out: Output) -> list[str]:
    key = _args_key(out)
    if key is None:
        return []
    return _rewrite_objects(out, lambda o: json.dumps(dict(reversed(list(o.items()))), ensure_ascii=False))


def _compact(out: Output) -> list[str]:
    if _call_objects(out):
        return _rewrite_objects(out, lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")))
    if out.block is None or not _json_args(out.ts):
        return []
    return [out.with_block(out.format(replace(out.ts, args_format=replace(out.ts.args_format, kv_sep=":",
                                                                            item_sep=","))))]


def _pretty(out: Output) -> list[str]:
    if _call_objects(out):
        return _rewrite_objects(out, lambda o: json.dumps(o, ensure_ascii=False, indent=2))
    if out.block is None or not _json_args(out.ts) or out.ts.args_format.indent:
        return []
    return [out.with_block(out.format(replace(out.ts, args_format=replace(out.ts.args_format, indent=2))))]


def _array_frame(ts: ToolCallStructure) -> bool:
    return ts.tool_section_start.rstrip().endswith("[") and ts.tool_section_end.lstrip().startswith("]")


def _array_dropped(out: Output) -> list[str]:
    """One call written as an object where the template writes an array of one."""
    ts = out.ts
    if len(out.calls) != 1 or not _json_format(ts) or not _array_frame(ts) or out.block is None:
        return []
    start = ts.tool_section_start.rstrip()[:-1]
    end = ts.tool_section_end.lstrip()[1:]
    return [out.with_block(start + out.format(replace(ts, tool_section_start="", tool_section_end="")) + end)]


def _array_added(out: Output) -> list[str]:
    """Calls written as a JSON array where the template writes objects one by one."""
    objs = _call_objects(out)
    if not objs or _array_frame(out.ts) or out.ts.tool_section_start.strip() or len(objs) != 1:
        return []
    return _rewrite_objects(out, lambda o: "[" + json.dumps(o, ensure_ascii=False) + "]")


def _separated(sep: str) -> Callable[[Output], list[str]]:
    """Two JSON call objects separated by ``sep`` instead of the template's separator."""
    def make(out: Output) -> list[str]:
        objs = _call_objects(out)
        if len(objs) < 2 or out.text[objs[0][1]:objs[1][0]] == sep:
            return []
        between = out.text[objs[0][1]:objs[1][0]]
        if between.strip() not in (",", ""):
            return []  # calls framed by markers of their own: the frame decides
        return [out.text[:objs[0][1]] + sep + out.text[objs[1][0]:]]
    return make


def _sections_repeated(out: Output) -> list[str]:
    """Each call in a section of its own (the section markers written again)."""
    ts = out.ts
    if len(out.calls) < 2 or out.block is None or not ts.tool_section_start.strip():
        return []
    blocks = [out.format(ts, [c]) for c in out.calls]
    return [out.with_block("".join(blocks)), out.with_block("\n".join(blocks))]


# ---- closers and openers

def _last_literal(ts: ToolCallStructure) -> str:
    """What closes a call (for a JSON call object: what follows its closing brace)."""
    parts = ts.call_parts
    text = parts[-1].text if parts and parts[-1].kind == "lit" else ""
    return text[text.rfind("}") + 1:] if _json_format(ts) else text


def _closer_missing_at_end(out: Output) -> list[str]:
    """The last call's closing marker and the section end missing (the model stopped there)."""
    ts = out.ts
    close = _last_literal(ts)
    if out.block is None or not any(is_marker(t) for t in tokenize(close)):
        return []
    block = out.text[out.block[0]:out.block[1]]
    tail = close + ts.tool_section_end
    if not block.endswith(tail):
        return []
    return [out.with_block(block[:-len(tail)])]


def _closer_missing_before_next(out: Output) -> list[str]:
    """The first call's closing marker missing: the next call's opener follows."""
    ts = out.ts
    close = _last_literal(ts)
    core = close.strip()
    if len(out.calls) < 2 or out.block is None or not any(is_marker(t) for t in tokenize(close)):
        return []
    first = format_call(ts, out.calls[0][0], out.calls[0][1], out.calls[0][2], 0)
    block = out.text[out.block[0]:out.block[1]]
    i = block.find(first)
    if i < 0 or not first.endswith(close):
        return []
    cut = i + len(first) - len(close)
    k = close.find(core)
    return [out.with_block(block[:cut] + close[:k] + close[k + len(core):] + block[i + len(first):])]


def _section_end_missing(out: Output) -> list[str]:
    ts = out.ts
    end = ts.tool_section_end
    if out.block is None or not any(is_marker(t) for t in tokenize(end)) or _array_frame(ts) or \
            out.message.get("content") and out.text.find(CONTENT) > out.block[0]:
        return []  # (content after the calls would run into them)
    block = out.text[out.block[0]:out.block[1]]
    return [out.with_block(block[:-len(end)])] if block.endswith(end) else []


def _section_start_missing(out: Output) -> list[str]:
    """Calls written without the section's opener (and closer) where each call has a marker of
    its own to start with."""
    ts = out.ts
    first = ts.call_parts[0].text if ts.call_parts and ts.call_parts[0].kind == "lit" else ""
    if out.block is None or not ts.tool_section_start.strip() or _array_frame(ts) or \
            not any(is_marker(t) for t in tokenize(first)):
        return []
    return [out.with_block(out.format(replace(ts, tool_section_start="", tool_section_end="")))]


def _alt_opener(out: Output) -> list[str]:
    """The calls opened by a marker the template writes for calls in another branch of its
    source (``<|python_tag|>``), the first one only."""
    if out.block is None or not out.ts.alt_openers:
        return []
    block = out.text[out.block[0]:out.block[1]]
    return [out.with_block(out.ts.alt_openers[0] + block)]


def _arg_closer_missing(out: Output) -> list[str]:
    """A tagged argument's closing marker missing (the next argument or the call's closer follows)."""
    ts = out.ts
    parts = ts.arg_parts
    close = parts[-1].text if ts.args_mode == "tagged" and parts and parts[-1].kind == "lit" else ""
    core = close.strip()
    if out.block is None or not core or not is_marker(core) or not out.calls or not out.calls[0][1]:
        return []
    block = out.text[out.block[0]:out.block[1]]
    name, args, _ = out.calls[0]
    first_value = next(iter(args.values()))
    i = block.find(close, max(0, block.find(str(first_value)))) if isinstance(first_value, str) else -1
    if i < 0:
        return []
    k = close.find(core)
    return [out.with_block(block[:i] + close[:k] + close[k + len(core):] + block[i + len(close):])]


# ---- names

_NAMESPACE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*\.)$")


def _namespace_dropped(out: Output) -> list[str]:
    """The function name without the namespace the template writes before it (``functions.``)."""
    ts = out.ts
    parts = list(ts.call_parts)
    k = next((i for i, p in enumerate(parts) if p.kind == "name"), None)
    if out.block is None or k is None or k == 0 or parts[k - 1].kind != "lit":
        return []
    m = _NAMESPACE.search(parts[k - 1].text)
    if m is None:
        return []
    parts[k - 1] = replace(parts[k - 1], text=parts[k - 1].text[:m.start(1)])
    return [out.with_block(out.format(replace(ts, call_parts=tuple(parts))))]


# ---- Python literals

def _without_own_quotes(ts: ToolCallStructure) -> ToolCallStructure:
    """``ts`` without the quotes the template writes around every value itself (``key="value"``,
    see :func:`chat_autoparser.generator.skeleton.quotes_apart`): a value in them is then written as Python
    writes it."""
    parts = quotes_apart(ts)
    own = own_quoted(parts)
    if not own:
        return ts
    drop = {i - 1 for i in own} | {i + 1 for i in own}
    return replace(ts, arg_parts=tuple(p for i, p in enumerate(parts) if i not in drop))


def _python_quoted(quote: str) -> Callable[[Output], list[str]]:
    """String arguments of a Python-syntax call written with ``quote`` (the template may write
    them bare, or with the other quote)."""
    def make(out: Output) -> list[str]:
        ts = out.ts
        if out.block is None or ts.function_format != FunctionFormat.PYTHONIC or ts.args_mode != "tagged":
            return []
        ts = _without_own_quotes(ts)
        if any(p.kind == "lit" and ("'" in p.text or '"' in p.text) for p in ts.arg_parts):
            return []  # (quotes the template writes elsewhere)
        fmt = dict(ts.value_formats).get("string")
        if fmt is None or (fmt.str_open == quote and not fmt.raw_strings):
            return []
        strings = replace(fmt, kind="dialect", raw_strings=False, str_open=quote, str_close=quote, escape="json")
        formats = tuple((t, strings if t == "string" else f) for t, f in ts.value_formats)
        if any(quote in v for _, args, _ in out.calls for v in args.values() if isinstance(v, str)):
            return []
        return [out.with_block(out.format(replace(ts, value_formats=formats)))]
    return make


# ---- precision: what must stay content

def _content_scenario(out: Output) -> bool:
    return out.scenario == "content" and CONTENT in out.text and out.ts.supports_tools and bool(out.ts.call_parts)


def _plain_content(out: Output) -> bool:
    """Content written as plain text (no wrapper or recipient header of its own) that holds the
    needle: where a model writes prose and code freely."""
    cs = out.analysis.content_structure
    return _content_scenario(out) and not cs.content_start.strip() and \
        CONTENT in (out.message.get("content") or "") and \
        out.ts.function_format not in (FunctionFormat.RECIPIENT_BASED, FunctionFormat.CHANNEL_BASED,
                                       FunctionFormat.MARKDOWN_CODE_BLOCK)


def _prose_with_call_json(out: Output) -> list[str]:
    if not _content_scenario(out) or CONTENT not in (out.message.get("content") or ""):
        return []
    prose = ' For example, {"name": "get_weather", "arguments": {"city": "Paris"}} is a JSON object.'
    return [out.text.replace(CONTENT, CONTENT + prose, 1)]


def _code_block_with_call(out: Output) -> list[str]:
    """A fenced code block that shows the template's own call syntax."""
    if not _plain_content(out):
        return []
    example = out.format(out.ts, [("get_weather", {"city": "Paris"}, "callZ0009")])
    return [out.text.replace(CONTENT, CONTENT + "\n\n```\n" + example + "\n```\n", 1)]


def _as_content(out: Output, perturbed: str) -> Message:
    """The original message with the text inserted after the content needle in its content."""
    at = out.text.find(CONTENT) + len(CONTENT)
    added = perturbed[at:at + len(perturbed) - len(out.text)]
    return {**out.message, "content": (out.message.get("content") or "").replace(CONTENT, CONTENT + added, 1)}


PERTURBATIONS: tuple[Perturbation, ...] = (
    Perturbation("ws_added_between_markers", "a newline or space between adjacent markers and JSON brackets",
                 _ws_added, canonical=True),
    Perturbation("ws_removed_between_markers", "no whitespace where the template writes some between markers",
                 _ws_removed, canonical=True),
    Perturbation("json_compact", "JSON written without spaces", _compact, canonical=True),
    Perturbation("json_pretty", "JSON written indented over several lines", _pretty, canonical=True),
    Perturbation("indented_markup", "markup lines indented", _indented, canonical=True),
    Perturbation("reasoning_start_again", "the reasoning start written again after a prompt that opened it",
                 _reasoning_start_again),
    Perturbation("ws_before_reasoning_start", "whitespace before the reasoning start marker", _ws_before_reasoning,
                 canonical=True),
    Perturbation("reasoning_unclosed_before_call", "reasoning never closed, a well-formed call after it",
                 _reasoning_unclosed),
    Perturbation("call_drafted_in_closed_reasoning", "a call written inside reasoning that closes before the "
                 "real call stays reasoning", _draft(fenced=False), expect=_with_draft(False), canonical=True),
    Perturbation("call_drafted_in_closed_reasoning_fenced", "a call quoted in a fenced block inside reasoning "
                 "that closes before the real call stays reasoning", _draft(fenced=True), expect=_with_draft(True),
                 canonical=True),
    Perturbation("call_fenced_in_unclosed_reasoning", "a call quoted in a fenced block inside reasoning that "
                 "never closes stays reasoning; the real call after it ends the reasoning", _fenced_draft_unclosed,
                 expect=_with_draft(True)),
    Perturbation("args_key_synonym", "arguments under 'parameters' for 'arguments' (or the reverse)", _synonym),
    Perturbation("args_as_json_string", "arguments given as a JSON-encoded string", _args_as_string),
    Perturbation("args_as_python_dict", "arguments written as a Python dict", _args_as_python_dict),
    Perturbation("fields_reordered", "the call object's fields in the other order", _reordered, canonical=True),
    Perturbation("object_for_array", "one call object where the template writes an array of one", _array_dropped),
    Perturbation("array_for_object", "a JSON array of calls where the template writes bare objects", _array_added),
    Perturbation("calls_comma_separated", "call objects separated by a comma", _separated(", ")),
    Perturbation("calls_newline_separated", "call objects separated by a newline", _separated("\n")),
    Perturbation("calls_semicolon_separated", "call objects separated by a semicolon", _separated("; ")),
    Perturbation("sections_repeated", "each call in a section of its own", _sections_repeated),
    Perturbation("call_closer_missing_at_end", "the last call's closer (and section end) missing",
                 _closer_missing_at_end),
    Perturbation("call_closer_missing_before_next", "a call's closer missing before the next call",
                 _closer_missing_before_next),
    Perturbation("section_end_missing", "the tool section's end missing", _section_end_missing),
    Perturbation("section_start_missing", "calls written without the section opener", _section_start_missing),
    Perturbation("arg_closer_missing", "a tagged argument's closer missing", _arg_closer_missing),
    Perturbation("alt_opener", "calls opened by a marker of another call form the template writes", _alt_opener),
    Perturbation("namespace_dropped", "the function name without the template's namespace", _namespace_dropped),
    Perturbation("python_single_quotes", "Python string arguments in single quotes", _python_quoted("'")),
    Perturbation("python_double_quotes", "Python string arguments in double quotes", _python_quoted('"')),
    Perturbation("prose_with_call_json", "prose that contains a call-like JSON object stays content",
                 _prose_with_call_json, expect=_as_content, canonical=True),
    Perturbation("code_block_with_call", "a fenced code block showing a call stays content", _code_block_with_call,
                 expect=_as_content, canonical=True),
)


def deviations(out: Output, perturbations: tuple[Perturbation, ...] = PERTURBATIONS) -> Iterator[Deviation]:
    """Every perturbation of ``out`` that its format admits (with the message it must give)."""
    for p in perturbations:
        for text in p.make(out):
            if text == out.text:
                continue
            expected = p.expect(out, text) if p.expect is not None else out.message
            yield Deviation(p.name, out.scenario, text, expected, out.text, _refused(out, p, text))


def _refused(out: Output, p: Perturbation, text: str) -> bool:
    """Whether a strict parse refuses the perturbed ``text``: not when the perturbation keeps
    the template's form (``canonical``), changes whitespace only, or drops a section end that
    is the model's stop token (a server strips it: the template's form ends there)."""
    if p.canonical or _SPACE.sub("", text) == _SPACE.sub("", out.text):
        return False
    if p.name == "section_end_missing":
        ts = split_turn_end(out.analysis)[0].tool_call_structure
        return bool(section_end(ts).strip()) and not turn_end_like(ts)
    return True


_SPACE = re.compile(r"\s+")


# --------------------------------------------------------------------------- comparing

def message_fields(message: Message) -> dict[str, Any]:
    """What must match: content, reasoning and the calls (name, arguments as values, id when
    both sides have one)."""
    calls = []
    for c in message.get("tool_calls") or []:
        try:
            args = json.loads(c["function"]["arguments"])
        except ValueError:
            args = c["function"]["arguments"]
        calls.append((c["function"]["name"], args))
    return {"content": message.get("content"), "reasoning_content": message.get("reasoning_content"),
            "tool_calls": calls}


def problem(got: Message, want: Message, text: str = "") -> str | None:
    """Why ``got`` is not the message ``want`` (None when it is); ids are compared where the
    model wrote them (in ``text``), not where the parser made them up."""
    a, b = message_fields(got), message_fields(want)
    if a == b:
        wanted_ids = [c.get("id") for c in want.get("tool_calls") or []]
        got_ids = [c.get("id") for c in got.get("tool_calls") or []]
        if any(w is not None and w != g and w in text for w, g in zip(wanted_ids, got_ids)):
            return f"ids {got_ids} != {wanted_ids}"
        return None
    diffs = [f"{k}: {a[k]!r} != {b[k]!r}" for k in a if a[k] != b[k]]
    return "; ".join(diffs)


def check(out: Output, dev: Deviation) -> str | None:
    """One-shot: why the perturbed output does not parse to the expected message, or why a
    strict parse does not refuse it when it must, or refuses it when it must not (None: all
    as required)."""
    got = out.parser.parse(dev.text)
    return problem(got, dev.expected, dev.text) or strict_problem(out.parser, dev.text, dev.strict)


def strict_problem(parser: Any, text: str, refused: bool) -> str | None:
    """Why ``parser.parse(text, strict=True)`` does not do as required: raise ``ParseError``
    (``refused``) or not."""
    try:
        parser.parse(text, strict=True)
    except ParseError as e:
        return None if refused else f"strict parse refuses it: {e}"
    return "strict parse accepts it" if refused else None
