"""The entry point (:func:`analyze_tools`): the steps in order, the alternative openers, content
and reasoning around calls, and the verification against the template's own renders."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence
from .. import probes as P
from ..caps import tool_call_messages, tool_forms
from ..diff import common_prefix_len, diff
from ..formatter import format_tool_calls
from ..instructions import instructed_openers, read_instructions
from ..source_markers import alternative_openers
from ..prober import Prober
from ..reasoning import Reasoning
from ..structures import Caps, Part, ToolCallStructure
from ..turns import Turns
from .arguments import _infer_args
from .calls import _as_calls, _call_parts, _sections, _structure_for_args
from .classification import _classify
from .context import Call, PROBES, VERIFY, _Ctx, _Fail, probe_tools
from .parts import _merge, _text


# --------------------------------------------------------------------------- entry point

def tools_section(prober: Prober, tools: Sequence[Any] | None = None, user: str = P.USER) -> str:
    """What passing ``tools`` (the probe tools by default) adds to the prompt of one ``user``
    message: the tools list and any instructions."""
    base = [P.user(user)]
    plain = prober.render("tools_section:none", base, add_generation_prompt=True) or ""
    with_tools = prober.render("tools_section", base, tools=tools or probe_tools(), add_generation_prompt=True) or ""
    d = diff(plain, with_tools)
    return d.b_middle(with_tools)


def _unsupported(reason: str, **extra: Any) -> ToolCallStructure:
    return ToolCallStructure(supports_tools=False, reason=reason, **extra)


def analyze_tools(prober: Prober, caps: Caps, turns: Turns, reasoning: Reasoning | None,
                  end_of_turn: str, content_wrapper: tuple[str, str] | None = None,
                  final_suffix: str = "") -> ToolCallStructure:
    """Phase 2 for the template behind ``prober`` (see the module docstring)."""
    ts = _analyze_tools(prober, caps, turns, reasoning, end_of_turn, content_wrapper, final_suffix)
    return ts if not ts.call_parts else _classify(ts, turns.default.prompt)


def _analyze_tools(prober: Prober, caps: Caps, turns: Turns, reasoning: Reasoning | None,
                   end_of_turn: str, content_wrapper: tuple[str, str] | None = None,
                   final_suffix: str = "") -> ToolCallStructure:
    if not caps.supports_tool_calls:
        if not caps.supports_tools:
            return _unsupported("template ignores `tools` and `tool_calls`")
        why = prober.failures.get("tool_call[object args]") or prober.failures.get("tool_call[string args]")
        if why is not None and why.kind == "raised":
            return _unsupported(f"template raises on assistant tool calls: {why.error}")
        read = read_instructions(tools_section(prober))
        if read is not None:
            return read
        return _unsupported("template renders the tools list but not assistant tool calls, "
                            "and its instructions state no call syntax that could be read")
    c = _Ctx(prober=prober, forms=tool_forms(caps), turns=turns, reasoning=reasoning, eot=end_of_turn,
             content_none=not caps.requires_nonnull_content,
             content_wrapper=content_wrapper if content_wrapper and content_wrapper[1].strip() else None,
             final_suffix=final_suffix)
    if c.block("one") is None:
        return _unsupported(f"the probe tool call failed to render: {c.failures.get('one', '?')}")
    try:
        args = _infer_args(c)
        before, after = _call_parts(c, args)
        sec_start, call_pre, call_post, sec_end, sep, parallel = _sections(c, args, before, after)
    except _Fail as e:
        return _unsupported(f"tool calls render, but their structure was not understood: {e}",
                            source="rendered")
    ts = replace(_structure_for_args(args), supports_tools=True, source="rendered",
                 tool_section_start=_text(sec_start, "", "", 0), tool_section_end=_text(sec_end, "", "", 0),
                 call_separator=sep, supports_parallel=parallel,
                 call_parts=tuple(_merge([*call_pre, Part("args"), *call_post])),
                 requires_nonnull_content=caps.requires_nonnull_content)
    ts = _content_and_reasoning(c, ts)
    return replace(_verify(c, ts), alt_openers=_alt_openers(c) + _instructed_openers(c, ts))


def _alt_openers(c: _Ctx) -> tuple[str, ...]:
    """Markers of the source's tool-call blocks that a conversation with a call (and its result,
    when the template takes one) does not render (see :mod:`chat_autoparser.analyzer.source_markers`)."""
    call = tool_call_messages(c.forms, PROBES["one"])
    shown = c.prober.render("alt_openers", [P.user(), call, P.tool_result(), P.assistant()], tools=probe_tools(),
                            add_generation_prompt=True) or c.block("one")
    if shown is None:
        return ()
    r = c.reasoning
    # the markers of the turn's own structure are never another call form
    own = [*(r if isinstance(r, tuple) else (r.start, r.end) if r is not None else ()),
           *(c.content_wrapper or ()), c.eot, c.final_suffix]
    return alternative_openers(c.prober.template.source, shown + "".join(own))


def _instructed_openers(c: _Ctx, ts: ToolCallStructure) -> tuple[str, ...]:
    """For calls rendered as bare JSON objects (no marker before them): the prefix the
    template's instructions glue to their example call (see :func:`instructed_openers`)."""
    first = ts.call_parts[0] if ts.call_parts else None
    if ts.tool_section_start.strip() or first is None or first.kind != "lit" or not first.text.startswith("{"):
        return ()
    names = tuple(t["function"]["name"] for t in probe_tools())
    return instructed_openers(tools_section(c.prober), first.text, names)


def _content_and_reasoning(c: _Ctx, ts: ToolCallStructure) -> ToolCallStructure:
    block = c._render_block("content+calls", PROBES["one"], content=P.CONTENT)
    after_content, before_content, sep = False, False, ""
    if block is not None and P.CONTENT in block:
        calls_text = format_tool_calls(ts, _as_calls(PROBES["one"]))
        i = block.find(P.CONTENT) + len(P.CONTENT)
        j = block.find(calls_text, i)
        if j >= 0:
            after_content, sep = True, block[i:j]
        else:  # the calls, then the content (before the section's end, or after it)
            end = ts.tool_section_end
            core = calls_text[:-len(end)] if end and calls_text.endswith(end) else calls_text
            k = block.find(core)
            before_content = 0 <= k and k + len(core) <= block.find(P.CONTENT)
    # reasoning on a tool-call turn, written the way this template takes reasoning
    r = c.reasoning if isinstance(c.reasoning, Reasoning) else None
    shape = P.reasoning_fields(r.field if r and r.field else "reasoning_content", P.REASONING, "")
    # the reasoning's own fields (content blocks carry the reasoning; a plain content is the call's)
    fields = {k: v for k, v in shape.items() if k != "content" or not isinstance(v, str)}
    msg = tool_call_messages(c.forms, PROBES["one"], **fields)
    kwargs = dict(r.probe_kwargs) if r else {}
    out = c.prober.render("tools[reasoning+calls]", [P.user(), msg], tools=probe_tools(), **kwargs)
    keeps = out is not None and P.REASONING in out
    return replace(ts, calls_after_content=after_content, content_after_calls=before_content, content_separator=sep,
                   reasoning_on_tool_turns=keeps)


def _verify(c: _Ctx, ts: ToolCallStructure) -> ToolCallStructure:
    ok, bad = [], []
    for probe in VERIFY:
        calls = PROBES[probe]
        if not ts.supports_parallel and len(calls) > 1:
            continue  # the template writes (or accepts) one call per turn
        block = c.block(probe)
        if block is None:
            bad.append((probe, f"template failed: {c.failures.get(probe, '?')}"))
            continue
        mine = format_tool_calls(ts, _as_calls(calls))
        if mine == block:
            ok.append(probe)
        else:
            k = common_prefix_len(mine, block)
            bad.append((probe, f"differs at {k}: formatter {mine[k:k + 40]!r} vs template {block[k:k + 40]!r}"))
    return replace(ts, verified=tuple(ok), unverified=tuple(bad))


def template_tool_block(template: Any, analysis: Any, calls: list[Call]) -> str | None:
    """The template's own rendering of ``calls`` as the model would write them (the tool block
    after the assistant header), or None when the template refuses them.

    ``template`` is a LoadedTemplate and ``analysis`` its TemplateAnalysis.
    """
    prober = Prober(template, engine=analysis.engine)
    prober.content_format = analysis.caps.content_format
    cs = analysis.content_structure
    c = _Ctx(prober=prober, forms=tool_forms(analysis.caps), turns=None,  # type: ignore[arg-type]
             reasoning=(cs.reasoning_start, cs.reasoning_end), eot=analysis.end_of_turn,
             content_none=not analysis.caps.requires_nonnull_content, final_suffix=analysis.final_suffix,
             content_wrapper=(cs.content_start, cs.content_end) if cs.content_end.strip() else None)
    return c._render_block("example", calls)


EXAMPLE_CALLS: list[Call] = [("get_weather", {"location": "Paris, France", "days": 3, "metric": True}, "call0001A")]
