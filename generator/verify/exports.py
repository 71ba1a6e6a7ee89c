"""Exports checked by the tools that consume them.

* HF ``response_template``: transformers' own ``parse_response`` (a test extra) reads our
  rendered outputs (the fixed point's, with their prompts as ``prefix``) into the same message
  as our parser: content and reasoning (HF strips its text regions), every call's name and
  arguments, and its id where the response template captures one.
* Structural tags: llguidance compiles the tags the way vLLM's guidance backend does
  (``StructTag.to_grammar``) and must accept every rendered tool-call output and refuse the same
  output with an unknown tool name or a mistyped argument.
* Edge-LLM: see :mod:`chat_autoparser.generator.export.edgellm` (its checker is the Jinja output itself).
* GBNF and Lark grammars: llguidance compiles each (GBNF through its own converter, Lark as it
  is) and must accept every rendered tool-call output and refuse its corruptions
  (:func:`chat_autoparser.generator.verify.engines.grammar_verdict`).

Each check returns an :class:`ExportVerdict`: ``verified``, ``not_expressible`` (with the
exporter's reason), ``nothing`` (no output of that kind to check) or ``failing`` (with what
differs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from chat_autoparser.analyzer.markers import is_marker, tokenize
from chat_autoparser.analyzer.structures import TemplateAnalysis

from ..export import NotExpressible, export
from ..message import turn_stop_markers
from .fixed_point import RT_TOOLS, FixedPoint

TOOL_SCENARIOS = ("tool_call", "parallel_tool_calls", "content+tool_calls", "reasoning+tool_calls", "tricky_arguments")


@dataclass
class ExportVerdict:
    fmt: str
    status: str  # "verified" | "not_expressible" | "nothing" | "failing"
    reason: str = ""
    checked: int = 0  # outputs (or conversations) checked
    details: list[str] = field(default_factory=list)


def _passing(fixed: Mapping[str, FixedPoint], scenarios: Sequence[str] | None = None) -> list[tuple[str, FixedPoint]]:
    return [(n, r) for n, r in fixed.items() if (scenarios is None or n in scenarios) and not r.skipped and r.ok
            and r.generated]


# --------------------------------------------------------------------------- HF response templates

def _args(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else value


def comparable(message: Mapping[str, Any], ids: bool) -> dict[str, Any]:
    """A message as both sides can be compared: stripped texts, parsed arguments, ids if asked."""
    calls = []
    for c in message.get("tool_calls") or []:
        fn = c.get("function") or {}
        calls.append({"name": fn.get("name"), "arguments": _args(fn.get("arguments")),
                      **({"id": c.get("id")} if ids else {})})
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("thinking")  # (the HF response template's field)
    return {"content": _text(message.get("content")), "reasoning_content": _text(reasoning), "tool_calls": calls}


def hf_parse(template: Mapping[str, Any], text: str, prompt: str, tools: Any) -> dict[str, Any]:
    """transformers' ``parse_response`` of ``text`` after ``prompt``."""
    from transformers.utils.chat_parsing import parse_response
    return parse_response(text, dict(template), prefix=prompt, tools=tools)


def token_chunks(text: str, n: int = 4) -> list[str]:
    """``text`` as a server streams it: markers (special tokens) whole, the text between them in
    ``n``-character chunks."""
    out: list[str] = []
    for tok in tokenize(text):
        out += [tok] if is_marker(tok) else [tok[i:i + n] for i in range(0, len(tok), n)]
    return out


def hf_stream(template: Mapping[str, Any], text: str, prompt: str, tools: Any) -> dict[str, Any]:
    """transformers' ``ResponseParser`` fed ``text`` after ``prompt`` as a server streams it."""
    from transformers.utils.chat_parsing.response_parser import ResponseParser
    p = ResponseParser(dict(template), prefix=prompt, tools=tools)
    for chunk in token_chunks(text):
        p.feed(chunk)
    return p.finalize()[0]


def verify_hf(analysis: TemplateAnalysis, fixed: Mapping[str, FixedPoint], *, streamed: bool = False
              ) -> ExportVerdict:
    """Our response template, read by transformers, against our parser on the fixed point:
    whole (``parse_response``), or ``streamed`` (``ResponseParser``: markers whole, the text
    between them in 4-character chunks; verdict ``hf-stream``)."""
    fmt, read, how = ("hf-stream", hf_stream, "ResponseParser streaming") if streamed else \
        ("hf", hf_parse, "parse_response")
    cases = _passing(fixed)
    try:
        template = export(analysis, "hf", tools=RT_TOOLS)
    except NotExpressible as e:
        return ExportVerdict(fmt, "not_expressible", e.reason)
    if not cases:
        return ExportVerdict(fmt, "nothing", "no rendered output passes the fixed point")
    captures_ids = "id" in json.dumps(template.get("fields", {}).get("tool_calls", {}).get("transform", {}))
    details = []
    for name, r in cases:
        tools = RT_TOOLS if r.with_tools else None
        try:
            theirs = read(template, r.generated, r.prompt, tools)
        except Exception as e:  # noqa: BLE001 - transformers raises ValueError/KeyError on what it cannot read
            details.append(f"{name}: {how} raised {type(e).__name__}: {e}")
            continue
        ours, got = comparable(r.parsed, captures_ids), comparable(theirs, captures_ids)
        if ours != got:
            details.append(f"{name}: ours {ours} != transformers {got}")
    status = "failing" if details else "verified"
    return ExportVerdict(fmt, status, details[0] if details else "", len(cases), details)


# --------------------------------------------------------------------------- structural tags

class StructTagChecker:
    """A structural tag compiled by llguidance the way vLLM's guidance backend compiles it
    (``StructTag.to_grammar``; each tag's trigger is the tag's trigger that starts its begin),
    matched over bytes (no special tokens: ``assume_special=False``)."""

    def __init__(self, tag: Mapping[str, Any]) -> None:
        import llguidance

        from .engines import EngineError, LarkChecker
        tags = []
        for s in tag["structures"]:
            trigger = next((t for t in tag["triggers"] if s["begin"].startswith(t)), None)
            if trigger is None:
                raise EngineError("llguidance", f"no trigger starts the begin {s['begin']!r}")
            tags.append(llguidance.StructTag(trigger=trigger, begin=s["begin"], grammar=s["schema"], end=s["end"]))
        self.checker = LarkChecker(llguidance.StructTag.to_grammar(tags, assume_special=False))

    def accepts(self, text: str) -> bool:
        return self.checker.accepts(text)


def _without_stop(text: str, stops: set[str]) -> str:
    """``text`` without the stop marker it ends with (a server stops there and strips it: a
    trigger written again after the last call is no call)."""
    tail = text.rstrip()
    for s in sorted(stops, key=len, reverse=True):
        if tail.endswith(s):
            return tail[:-len(s)]
    return text


def verify_structural_tag(analysis: TemplateAnalysis, fixed: Mapping[str, FixedPoint]) -> ExportVerdict:
    """Our structural tags, compiled by llguidance, accept the rendered tool-call outputs and
    refuse them with an unknown tool name (where the trigger does not hold the name) or with a
    string argument unquoted."""
    cases = [(n, r) for n, r in _passing(fixed, TOOL_SCENARIOS) if r.parsed.get("tool_calls")]
    if not cases:
        return ExportVerdict("structural-tag", "nothing", "no rendered tool-call output passes the fixed point")
    details, checked, reasons = [], 0, []
    stops = turn_stop_markers(analysis)
    for parallel in (False, True):
        try:
            tag = export(analysis, "structural-tag", tools=RT_TOOLS, parallel_tool_calls=parallel)
        except NotExpressible as e:
            reasons.append(e.reason)
            continue
        checker = StructTagChecker(tag)
        for name, r in cases:
            if (name == "parallel_tool_calls") != parallel:
                continue
            checked += 1
            text = _without_stop(r.generated, stops)
            if not checker.accepts(text):
                details.append(f"{name} (parallel={parallel}): refused {text!r}")
            if not any("get_weather" in t for t in tag["triggers"]) and "get_weather" in r.generated:
                if checker.accepts(r.generated.replace("get_weather", "get_weathex")):
                    details.append(f"{name}: accepted an unknown tool name")
            if '"Paris"' in r.generated and checker.accepts(r.generated.replace('"Paris"', "Paris", 1)):
                details.append(f"{name}: accepted an unquoted string argument")
    if not checked:
        return ExportVerdict("structural-tag", "not_expressible", reasons[0] if reasons else "no case to check")
    status = "failing" if details else "verified"
    return ExportVerdict("structural-tag", status, details[0] if details else "", checked, details)


# --------------------------------------------------------------------------- Edge-LLM

def verify_edgellm(template: Any, analysis: TemplateAnalysis) -> ExportVerdict:
    """The Edge-LLM export: derived, then every standard conversation formatted with it equals
    the Jinja output. A conversation that differs is not expressible only where the template's own
    renders show why (:func:`~chat_autoparser.generator.export.edgellm.explain`); otherwise the export fails."""
    from ..export import edgellm
    try:
        ct = edgellm.derive(template, analysis)
    except NotExpressible as e:
        return ExportVerdict("edgellm", "not_expressible", e.reason)
    bad = edgellm.check(template, analysis, ct)
    if bad:  # a limit of the format only where the template's own renders show it; else our bug
        b = bad[0]
        why = edgellm.explain(template, analysis, b)
        where = f"conversation {b['conversation']!r} (enable_thinking={b['enable_thinking']})"
        if why is None:
            return ExportVerdict("edgellm", "failing", f"the flattened {where} differs from the template's",
                                 details=[repr(b)])
        return ExportVerdict("edgellm", "not_expressible", f"cannot be flattened: {why}", details=[repr(b)])
    return ExportVerdict("edgellm", "verified", checked=len(edgellm.CONVERSATIONS))


# --------------------------------------------------------------------------- grammars

def verify_grammar(analysis: TemplateAnalysis, fixed: Mapping[str, FixedPoint], fmt: str) -> ExportVerdict:
    """The exported GBNF or Lark grammar, compiled by llguidance, on the rendered tool-call outputs."""
    from ..params import generate_parser
    from .engines import LarkChecker, LLGuidanceChecker, grammar_verdict
    cases = [(n, r) for n, r in _passing(fixed, TOOL_SCENARIOS) if r.parsed.get("tool_calls")]
    if not cases:
        return ExportVerdict(fmt, "nothing", "no rendered tool-call output passes the fixed point")
    names = [t["function"]["name"] for t in RT_TOOLS]
    details = []
    for name, r in cases:
        try:
            text = export(analysis, fmt, tools=RT_TOOLS, enable_thinking=r.enable_thinking)
        except NotExpressible as e:
            return ExportVerdict(fmt, "not_expressible", e.reason)
        checker = LLGuidanceChecker(text) if fmt == "gbnf" else LarkChecker(text)
        params = generate_parser(analysis, tools=RT_TOOLS, enable_thinking=r.enable_thinking)
        status, note, _ = grammar_verdict(checker, params, r.generated, True, names)
        if status != "pass":
            details.append(f"{name}: {note}")
    return ExportVerdict(fmt, "failing" if details else "verified", details[0] if details else "", len(cases), details)


# Each export's checks, by the tool that reads it (one verdict per key; the HF response template
# is checked one-shot and streamed). Every entry of generator.export.EXPORTERS has one here
# (tests/test_exports.py), so a new export cannot go unchecked.
VERIFIERS: dict[str, Callable[[Any, TemplateAnalysis, Mapping[str, FixedPoint]], ExportVerdict]] = {
    "hf": lambda template, analysis, fixed: verify_hf(analysis, fixed),
    "hf-stream": lambda template, analysis, fixed: verify_hf(analysis, fixed, streamed=True),
    "structural-tag": lambda template, analysis, fixed: verify_structural_tag(analysis, fixed),
    "edgellm": lambda template, analysis, fixed: verify_edgellm(template, analysis),
    "gbnf": lambda template, analysis, fixed: verify_grammar(analysis, fixed, "gbnf"),
    "lark": lambda template, analysis, fixed: verify_grammar(analysis, fixed, "lark"),
}


def verify_exports(template: Any, analysis: TemplateAnalysis, fixed: Mapping[str, FixedPoint]
                   ) -> dict[str, ExportVerdict]:
    """Every format's verdict for one template (``fixed``: its fixed points, every scenario)."""
    return {name: verify(template, analysis, fixed) for name, verify in VERIFIERS.items()}
