"""Oracle 1 over the whole corpus: the inferred structure reproduces the template's own
tool-call rendering, byte for byte, on every probe (one call, two and three parallel calls,
zero arguments, every JSON type, nested/unicode/newline/quote/number/boolean arguments).

"Renders tool calls" is decided here independently of the analysis: a tool-call message whose
function name comes out after the user turn.
"""

from __future__ import annotations

import pytest

from chat_autoparser.analyzer.caps import tool_forms
from chat_autoparser.analyzer.formatter import format_tool_calls
from chat_autoparser.analyzer.load import load_template
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.analyzer.structures import TemplateAnalysis
from chat_autoparser.analyzer.tool_calls import PROBES, VERIFY, _as_calls, _Ctx
from chat_autoparser.generator.verify.applicability import source_facts

# Templates whose rendered calls the analysis cannot describe, with the reason (strict:
# the test fails when one starts passing, so this list cannot go stale).
KNOWN_FAILURES = {
    "extra/MiniMaxAI-MiniMax-Text-01-hf.jinja":
        "renders the assistant's function calls as a separate system-like turn before the reply; "
        "the probe's call block is not found after the assistant header",
}


def _renders_tool_calls(path) -> bool:
    return source_facts(load_template(path)).renders_calls


def test_formatter_reproduces_template(corpus_entry, analyzed):
    path = corpus_entry.path
    if not _renders_tool_calls(path):
        pytest.skip("the template renders no tool calls (test_no_tools_reason covers it)")
    if corpus_entry.name not in KNOWN_FAILURES:
        _formatter_reproduces(path, analyzed)
        return
    try:
        _formatter_reproduces(path, analyzed)
    except AssertionError:
        pytest.xfail(KNOWN_FAILURES[corpus_entry.name])
    pytest.fail(f"{corpus_entry.name} passes now: take it off KNOWN_FAILURES")


def _formatter_reproduces(path, analyzed) -> None:
    a = analyzed(path)
    assert isinstance(a, TemplateAnalysis), f"analysis failed: {a}"
    ts = a.tool_call_structure
    assert ts.supports_tools, f"template renders tool calls but analysis says: {ts.reason}"
    prober = Prober(load_template(path))
    from chat_autoparser.analyzer.caps import probe_caps
    from chat_autoparser.analyzer.turns import probe_turns
    from chat_autoparser.analyzer.reasoning import detect_reasoning
    caps = probe_caps(prober)
    turns = probe_turns(prober, caps)
    ctx = _Ctx(prober=prober, forms=tool_forms(caps), turns=turns,
               reasoning=detect_reasoning(prober, caps, turns, None), eot=a.end_of_turn,
               content_none=not caps.requires_nonnull_content,
               content_wrapper=(a.content_structure.content_start, a.content_structure.content_end)
               if a.content_structure.content_end.strip() else None, final_suffix=a.final_suffix)
    parallel = source_facts(load_template(path)).renders_parallel
    mismatches = []
    for probe in VERIFY:
        calls = PROBES[probe]
        if len(calls) > 1 and not parallel:
            continue  # the template writes one call per turn (its renders say, not the analysis)
        block = ctx.block(probe)
        if block is None:
            continue  # the template itself refuses this input (reported in the analysis)
        mine = format_tool_calls(ts, _as_calls(calls))
        if mine != block:
            mismatches.append(f"{probe}: formatter {mine!r} != template {block!r}")
    assert not mismatches, "\n".join(mismatches)


def test_no_tools_reason(corpus_entry, analyzed):
    """Templates without tool support say why."""
    a = analyzed(corpus_entry.path)
    if not isinstance(a, TemplateAnalysis) or a.tool_call_structure.supports_tools:
        pytest.skip("no analysis, or the analysis finds tool calls: nothing to say why not")
    assert a.tool_call_structure.reason
