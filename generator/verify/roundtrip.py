"""Prefix-cache roundtrip: does the next request start with this request and the model's output?

The simulation of one agent step (seed 000, "parse-render roundtrip"): turn N renders the prompt;
the model writes its answer in the template's own format (the template's rendering of that turn,
calls written by :mod:`chat_autoparser.analyzer.formatter`); our parser reads it; turn N+1's messages are built
as an OpenAI client builds them (the parsed message, arguments as JSON text or as an object, then
tool results or a new user message); the template renders turn N+1. The verdict: ``prompt +
output`` is a prefix of the new prompt (string level) and, with a tokenizer, ``tokens(prompt) +
tokens(output)`` is a prefix of ``tokens(new prompt)`` (token level, special tokens atomic).

A failure gets one diagnosis from :data:`DIAGNOSES`, found from the two texts and the analysis,
with the evidence in the result. Scenarios (:data:`SCENARIOS`) are fixed so reports compare;
one that does not apply to a template gets ``None`` verdicts and says why.

Example::

    >>> report = check_roundtrip("templates/chatml-think.jinja", scenarios=["tool_call_reasoning"])
    >>> r = report.results[0]
    >>> r["scenario"], r["string_prefix"], r["diagnosis"]
    ('tool_call_reasoning', True, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.structures import TemplateAnalysis

from chat_autoparser.errors import RoundtripInputError

from ..params import generate_parser
from ..prefix.conversation import (
    Conversation,
    answer_calls,
    client_message,
    template_of,
    tool_message,
)
from ..prefix.tokens import TokenizerAdapter, load_tokenizer
from .diagnosis import CONTEXT, DIAGNOSES, Facts, diagnose
from .scenarios import (
    REASONING,
    RESULTS,
    ROUNDS,
    SCENARIOS,
    TOOLS,
    USER,
    Step,
    assistant,
    default_setting,
    plans,
)


@dataclass(frozen=True)
class Result:
    """One scenario under one template setting."""

    scenario: str
    kwargs: dict[str, Any]
    string_prefix: bool | None = None
    token_prefix: bool | None = None
    diagnosis: str | None = None
    position: int | None = None
    expected: str = ""
    got: str = ""
    evidence: str = ""  # why the diagnosis, or why the scenario does not apply
    token_position: int | None = None
    round: int | None = None  # multi_turn_tools: the round that broke (0-based)
    output: str = ""  # the model output the check parsed

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "kwargs": dict(self.kwargs), "string_prefix": self.string_prefix,
                "token_prefix": self.token_prefix, "diagnosis": self.diagnosis, "position": self.position,
                "expected": self.expected, "got": self.got, "evidence": self.evidence,
                "token_position": self.token_position, "round": self.round, "output": self.output}


@dataclass
class RoundtripReport:
    """Every result of :func:`check_roundtrip` for one template."""

    template: str
    results: list[dict[str, Any]] = field(default_factory=list)
    tokenizer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "tokenizer": self.tokenizer, "results": [dict(r) for r in self.results]}

    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["string_prefix"] is False or r["token_prefix"] is False]

    @property
    def ok(self) -> bool:
        """No scenario that applies breaks the prefix."""
        return not self.failures()


def _output(conv: Conversation, step: Step, prompt: str) -> tuple[str, str] | None:
    """(the model's output, how it was written) for a step, or None when it cannot be written."""
    written = conv.model_output(step.before, step.message, step.kwargs, prompt, step.enable_thinking)
    if written is None:
        return None
    out, source = written
    if step.truncate:
        i = out.find(REASONING)
        if i < 0:
            return None
        out = out[:i + len(REASONING)]
    elif step.extra_newline:
        at = conv.after_reasoning_end(out, REASONING)
        if at is None:
            return None
        out = out[:at] + "\n" + out[at:]
    return out, source


def run_turn(conv: Conversation, step: Step, tokenizer: TokenizerAdapter | None, scenario: str
             ) -> tuple[Result, dict[str, Any] | None]:
    """The verdict of one step, and the assistant message the client built (for the next step)."""
    kw = step.kwargs
    na = Result(scenario, kw)
    prompt = conv.render(step.before, kw, generation_prompt=True)
    if prompt is None:
        return _na(na, conv.why("the template refuses the conversation")), None
    written = _output(conv, step, prompt)
    if written is None:
        return _na(na, "the template's own rendering of the answer shows none of the parts this scenario "
                       "needs (reasoning, or the reasoning end to write whitespace after)"), None
    output, source = written
    params = generate_parser(conv.analysis, tools=conv.tools, enable_thinking=step.enable_thinking, prompt=prompt)
    parsed = params.parser.parse(output)
    message = client_message(conv, parsed, step.args_form)
    nxt = conv.render(step.before + [message] + answer_calls(step.after, parsed.get("tool_calls") or []), kw,
                      generation_prompt=True)
    if nxt is None:
        return _na(na, conv.why("the template refuses the next turn built from the parsed message")), message
    expected = prompt + output
    i = common_prefix_len(expected, nxt)
    string_ok = i == len(expected)
    head = conv.render(step.before, kw, generation_prompt=False)
    turn = common_prefix_len(head, prompt) if head is not None else len(prompt)
    facts = Facts(conv, step, prompt, output, parsed, message, turn)
    res = Result(scenario, kw, string_prefix=string_ok, output=output)
    if not string_ok:
        diagnosis, evidence = diagnose(facts, expected, nxt, i)
        res = _with_diff(res, expected, nxt, i, diagnosis, evidence + f" (output written from {source})")
    if tokenizer is not None:
        res = _token_verdict(res, facts, tokenizer, prompt, output, nxt)
    return res, message


def _na(res: Result, why: str) -> Result:
    return Result(res.scenario, res.kwargs, evidence=f"not applicable: {why}")


def _with_diff(res: Result, expected: str, got: str, i: int, diagnosis: str, evidence: str) -> Result:
    a = max(0, i - CONTEXT)
    return Result(res.scenario, res.kwargs, res.string_prefix, res.token_prefix, diagnosis, i,
                  expected[a:i + CONTEXT], got[a:i + CONTEXT], evidence, res.token_position, res.round, res.output)


def _token_verdict(res: Result, facts: Facts, tok: TokenizerAdapter, prompt: str, output: str,
                   nxt: str) -> Result:
    want = tok.encode(prompt) + tok.encode(output)
    got, starts = tok.encode_with_offsets(nxt)
    j = next((k for k, (x, y) in enumerate(zip(want, got)) if x != y), min(len(want), len(got)))
    ok = j == len(want)
    out = Result(res.scenario, res.kwargs, res.string_prefix, ok, res.diagnosis, res.position, res.expected,
                 res.got, res.evidence, None if ok else j, res.round, res.output)
    if ok or res.string_prefix is False:
        return out
    # the texts agree: the tokens part at a seam where the text around the output merges
    at = starts[j] if j < len(starts) else len(nxt)
    seam = f"tokens of the output {_pieces(tok, want[j:j + 3])} vs the new prompt's {_pieces(tok, got[j:j + 3])}"
    end = facts.conv.analysis.content_structure.reasoning_end.strip()
    if facts.step.truncate and end and nxt[len(prompt) + len(output):].lstrip().startswith(end):
        diagnosis = "reasoning_force_closed"
        why = (f"the output stops inside the reasoning; the template closes it with {end!r}, and the closer's "
               f"whitespace re-tokenizes the output's last token: {seam}")
    else:
        diagnosis, why = "bpe_boundary", f"same text, other tokens at character {at}: {seam}"
    expected = prompt + output
    return _with_diff(Result(res.scenario, res.kwargs, res.string_prefix, False, None, None, "", "", "", j,
                             res.round, res.output), expected, nxt, at, diagnosis, why)


def _pieces(tok: TokenizerAdapter, ids: list[int]) -> str:
    return "[" + ", ".join(repr(tok.decode([i])) for i in ids) + "]"

def _multi_turn(conv: Conversation, tokenizer: TokenizerAdapter | None) -> Result:
    """Three tool rounds, each request built from the parsed earlier answers; the first round that
    breaks the prefix is reported (all pass: the last round's result)."""
    kw, enable, reasons = default_setting(conv)
    history: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    last = Result("multi_turn_tools", kw)
    for k, call in enumerate(ROUNDS):
        msg = assistant(conv, reasons, [call])
        msg["tool_calls"][0]["id"] = conv.call_id(call[0], k)
        result = [tool_message(0, RESULTS[k])]
        res, built = run_turn(conv, Step(history, msg, result, kw, enable), tokenizer, "multi_turn_tools")
        last = replace(res, round=k)
        if built is None or res.string_prefix is not True or res.token_prefix is False:
            return last
        history = history + [built] + answer_calls(result, built.get("tool_calls") or [])
    return last


def check_roundtrip(template_or_analysis: str | Path | LoadedTemplate | TemplateAnalysis, *,
                    tokenizer: Any = None, scenarios: Sequence[str] | None = None,
                    analysis: TemplateAnalysis | None = None, chat_template_kwargs: Mapping[str, Any] | None = None,
                    **template_kwargs: Any) -> RoundtripReport:
    """Run the prefix-cache roundtrip scenarios on a template (see the module docstring).

    ``tokenizer``: anything :func:`~chat_autoparser.generator.prefix.tokens.load_tokenizer` takes (a tokenizer.json,
    a .gguf vocabulary, a tokenizer object) for token-level verdicts; ``scenarios``: a subset of
    :data:`SCENARIOS`; ``chat_template_kwargs`` (the engines' form) and ``template_kwargs``:
    variables passed to every render (they override the setting a scenario picks; ``template_kwargs``
    win).
    """
    template_kwargs = {**(chat_template_kwargs or {}), **template_kwargs}
    names = list(SCENARIOS if scenarios is None else scenarios)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise RoundtripInputError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    template, analysis = template_of(template_or_analysis, analysis)
    tok = load_tokenizer(tokenizer) if tokenizer is not None else None
    conv = Conversation(template, analysis, TOOLS, template_kwargs)
    report = RoundtripReport(analysis.template, tokenizer=tok.name if tok else None)
    for name in names:
        steps = plans(conv, name)
        if isinstance(steps, str):
            results = [Result(name, {}, evidence=f"not applicable: {steps}")]
        elif name == "multi_turn_tools":
            results = [_multi_turn(conv, tok)]
        else:
            results = [run_turn(conv, p, tok, name)[0] for p in steps]
        report.results.extend(r.to_dict() for r in results)
    return report


__all__ = ["check_roundtrip", "RoundtripReport", "SCENARIOS", "DIAGNOSES", "TOOLS", "diagnose", "run_turn",
           "RoundtripInputError"]
