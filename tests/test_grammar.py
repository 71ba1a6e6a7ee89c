"""Grammars checked by real engines over the corpus.

For every template whose tool calls render:

* the grammar passes our strict GBNF check (llama.cpp's rules and the portability rules);
* llguidance (byte-level, its own GBNF front-end) compiles it and accepts every tool-call output
  of the render → parse fixed point (from the trigger on for a lazy grammar; see
  ``generator.verify.engines.grammar_verdict``);
* outputs the template renders for broken calls are refused: an unknown tool name, a missing
  required argument, a value outside the enum, and (JSON arguments) a string without quotes.

llama.cpp itself is the extended check, the tests marked ``slow`` (it has to be compiled; see
``llama_vocab`` in conftest.py): ``python -m pytest -m slow tests/test_grammar.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chat_autoparser.analyzer import load_template
from chat_autoparser.analyzer.caps import tool_call_messages, tool_forms
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.generator.verify.fixed_point import RT_TOOLS, generated_text, kwargs_for
from chat_autoparser.analyzer.structures import ArgumentFormat
from chat_autoparser.generator import generate_parser
from chat_autoparser.generator.message import turn_stop_markers
from chat_autoparser.generator.verify.engines import EngineError, LLGuidanceChecker, LlamaCppWorker, grammar_verdict, llama_cpp_verdict
from chat_autoparser.generator.verify.gbnf_check import check_gbnf

NAMES = [t["function"]["name"] for t in RT_TOOLS]
# scenarios whose calls keep the tools' schemas ("empty_arguments" leaves out a required argument)
SCHEMA_VALID = ("tool_call", "parallel_tool_calls", "content+tool_calls", "reasoning+tool_calls", "tricky_arguments")

ENUM_TOOLS = [{"type": "function", "function": {
    "name": "set_units", "description": "Choose units.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "units": {"type": "string", "enum": ["metric", "imperial"]}},
                   "required": ["city", "units"]}}}]


def _passing(fixed: dict, scenarios: tuple[str, ...]) -> list[tuple[str, Any]]:
    """(scenario, fixed point) for the scenarios that pass and have calls exactly when they should."""
    out = []
    for name in scenarios:
        r = fixed.get(name)
        if r is not None and not r.skipped and r.ok and bool(r.parsed.get("tool_calls")) == (name in SCHEMA_VALID):
            out.append((name, r))
    return out


def _grammar_cases(analysis, fixed: dict) -> list[tuple[Any, Any, str, str]]:
    """(params, checker, scenario, output) for each tool-call output of the fixed point."""
    out, built = [], {}
    for name, r in _passing(fixed, SCHEMA_VALID):
        if r.enable_thinking not in built:
            params = generate_parser(analysis, tools=RT_TOOLS, enable_thinking=r.enable_thinking)
            built[r.enable_thinking] = (params, LLGuidanceChecker(params.grammar) if params.grammar else None)
        params, checker = built[r.enable_thinking]
        out.append((params, checker, name, r.generated))
    return out


ARGS_FIRST = ("the template's instructions put the arguments before the name ({\"arguments\": ..., \"name\": ...}): "
              "the grammar accepts only the first tool's arguments there (the name that would choose another "
              "tool's comes after them)")
# (template, scenario) pairs whose output the grammar refuses today: the reason, and a text the
# refusal must contain (a different refusal fails)
KNOWN: dict[str, dict[str, tuple[str, str]]] = {
    "extra/tiiuae-Falcon-H1-0.5B-Instruct.jinja": {
        "parallel_tool_calls": (ARGS_FIRST, "llguidance refuses the text at character 135"),
        "tricky_arguments": (ARGS_FIRST, "llguidance refuses the text at character 28")},
    "extra/tiiuae-Falcon-H1-7B-Instruct-axolotl.jinja": {
        "parallel_tool_calls": (ARGS_FIRST, "llguidance refuses the text at character 135"),
        "tricky_arguments": (ARGS_FIRST, "llguidance refuses the text at character 28")},
}


def test_grammar_accepts_rendered_calls(corpus_entry, analyzed, fixed_points):
    fixed = fixed_points(corpus_entry.path)
    if not fixed:
        pytest.skip("no analysis (its error is checked by test_golden)")
    cases = _grammar_cases(analyzed(corpus_entry.path), fixed)
    if not cases:
        pytest.skip("no tool-call output to check (the template renders no calls)")
    refused = {}
    for params, checker, scenario, output in cases:
        assert params.grammar, f"{scenario}: tool calls render but no grammar is built"
        issues = check_gbnf(params.grammar)
        assert not issues, f"{scenario}: " + "; ".join(map(str, issues[:5]))
        status, note, text = grammar_verdict(checker, params, output, True, NAMES)
        if status != "pass":
            refused[scenario] = f"{note}\nfed: {text!r}"
    known = KNOWN.get(corpus_entry.name, {})
    new = {s: why for s, why in refused.items() if s not in known or known[s][1] not in why}
    assert not new, "\n".join(f"{s}: {why}" + (f" (KNOWN: {known[s][1]!r})" if s in known else "")
                               for s, why in new.items())
    assert set(known) <= set(refused), f"{sorted(set(known) - set(refused))} accepted now: take them off KNOWN"


def test_known_grammar_entries_are_corpus_templates(corpus):
    assert set(KNOWN) <= {e.name for e in corpus}


def _render(loaded, analysis, enable: bool, calls: list[tuple[str, dict, str]], tools) -> str | None:
    prober = Prober(loaded, engine=analysis.engine)
    prober.content_format = analysis.caps.content_format
    forms = tool_forms(analysis.caps)
    message = tool_call_messages(forms, calls, content=None)
    cut = generated_text(prober, message, tools, kwargs_for(analysis, enable))
    return cut[1] if cut else None


def _broken_calls(entry, analyzed, fixed_points):
    """(params, valid output, {what is broken: output}) for the enum tool, rendered the way the
    template renders its fixed point's tool call; skips when there is none."""
    fixed = fixed_points(entry.path)
    analysis = analyzed(entry.path)
    r = fixed.get("tool_call") if fixed else None
    if r is None or r.skipped or not r.ok:
        pytest.skip("no rendered tool call to start from")
    enable = r.enable_thinking
    params = generate_parser(analysis, tools=ENUM_TOOLS, enable_thinking=enable)
    loaded = load_template(entry.path)
    good = {"city": "Paris", "units": "metric"}
    valid = _render(loaded, analysis, enable, [("set_units", good, "callU0001")], ENUM_TOOLS)
    if valid is None or "set_units" not in valid or "metric" not in valid:
        pytest.skip("the template does not render this call the way it renders the probes")
    broken: dict[str, str | None] = {
        "unknown tool name": _render(loaded, analysis, enable, [("set_unitz", good, "callU0001")], ENUM_TOOLS),
        "missing required argument": _render(loaded, analysis, enable, [("set_units", {"units": "metric"},
                                                                         "callU0001")], ENUM_TOOLS),
        "value outside the enum": _render(loaded, analysis, enable, [("set_units", {"city": "Paris", "units": "kelvin"},
                                                                      "callU0001")], ENUM_TOOLS),
    }
    ts = analysis.tool_call_structure
    if ts.argument_format == ArgumentFormat.JSON and '"Paris"' in valid:
        broken["string without quotes (invalid JSON)"] = valid.replace('"Paris"', "Paris", 1)
    return params, valid, {what: text for what, text in broken.items() if text is not None}


def test_grammar_refuses_broken_calls(corpus_entry, analyzed, fixed_points):
    params, valid, broken = _broken_calls(corpus_entry, analyzed, fixed_points)
    checker = LLGuidanceChecker(params.grammar)
    status, note, _ = grammar_verdict(checker, params, valid, True, ["set_units"])
    assert status == "pass", f"valid call refused: {note}"
    for what, text in broken.items():
        status, note, fed = grammar_verdict(checker, params, text, True, ["set_units", "set_unitz"])
        assert status == "fail", f"{what}: accepted {fed!r}"


# -- llama.cpp: the extended check (pytest -m slow; needs llama-cpp-python and fetch-corpus) -------
#
# llama.cpp is fed each whole output. With a lazy grammar it finds the start itself, with the
# trigger patterns as its server builds them, so this also checks the triggers: they compile as
# std::regex, fire before the calls, and never fire in an output without calls. Tokens come from
# a real vocabulary (Qwen2), with its special tokens.

NO_CALLS = ("content", "reasoning+content")


@pytest.fixture(scope="module")
def llama_worker(llama_vocab):
    worker = LlamaCppWorker(llama_vocab)
    yield worker
    worker.close()


def _llama_runs(worker, params, texts, analysis):
    try:  # llama.cpp stops feeding at the markers the model stops at
        return worker.runs(params.grammar, texts, params.grammar_triggers if params.grammar_lazy else None,
                           turn_stop_markers(analysis))
    except EngineError as e:
        pytest.fail(f"{e} (triggers {params.grammar_triggers})")


@pytest.mark.slow
def test_llama_cpp_accepts_rendered_outputs(corpus_entry, analyzed, fixed_points, llama_worker):
    fixed = fixed_points(corpus_entry.path)
    if not fixed:
        pytest.skip("no analysis (its error is checked by test_golden)")
    analysis = analyzed(corpus_entry.path)
    by_setting: dict[bool, list[tuple[str, str]]] = {}
    for name, r in _passing(fixed, SCHEMA_VALID + NO_CALLS):
        by_setting.setdefault(r.enable_thinking, []).append((name, r.generated))
    checked = 0
    for enable, outputs in by_setting.items():
        params = generate_parser(analysis, tools=RT_TOOLS, enable_thinking=enable)
        if not params.grammar or not any(name in SCHEMA_VALID for name, _ in outputs):
            continue
        runs = _llama_runs(llama_worker, params, [text for _, text in outputs], analysis)
        for (name, text), run in zip(outputs, runs):
            with_calls = name in SCHEMA_VALID
            first_call = min((i for n in NAMES if (i := text.find(n)) >= 0), default=len(text))
            if with_calls and run.stop < first_call:
                continue  # the template ends the turn before its calls: a model stops there
            status, note, fed = llama_cpp_verdict(run, params, text, with_calls, NAMES)
            assert status == "pass", f"{name} (enable_thinking={enable}): {note}\nfed: {fed!r}"
            checked += 1
    if not checked:
        pytest.skip("no tool-call output to check (the template renders no calls)")


@pytest.mark.slow
def test_llama_cpp_refuses_broken_calls(corpus_entry, analyzed, fixed_points, llama_worker):
    params, valid, broken = _broken_calls(corpus_entry, analyzed, fixed_points)
    runs = _llama_runs(llama_worker, params, [valid, *broken.values()], analyzed(corpus_entry.path))
    status, note, _ = llama_cpp_verdict(runs[0], params, valid, True, ["set_units"])
    assert status == "pass", f"valid call refused: {note}"
    for (what, text), run in zip(broken.items(), runs[1:]):
        status, note, fed = llama_cpp_verdict(run, params, text, True, ["set_units", "set_unitz"])
        assert status == "fail", f"{what}: accepted {fed!r}"


def test_required_tool_choice_and_parallel_off(analyzed):
    """tool_choice=required: a whole-output grammar in which a call is mandatory; parallel
    calls off: one call only."""
    from pathlib import Path
    a = analyzed(Path(__file__).resolve().parents[1] / "templates" / "chatml-think.jinja")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    req = generate_parser(a, tools=RT_TOOLS, tool_choice="required")
    assert not req.grammar_lazy and not req.grammar_triggers
    checker = LLGuidanceChecker(req.grammar)
    assert checker.accepts("Let me check.\n" + call)
    assert not checker.accepts("No call at all.")
    single = generate_parser(a, tools=RT_TOOLS, parallel_tool_calls=False)
    one = LLGuidanceChecker(single.grammar)
    assert one.accepts(call)
    assert not one.accepts(call + "\n" + call)
    assert generate_parser(a, tools=RT_TOOLS, tool_choice="none").grammar is None


def test_grammar_follows_schema_details():
    """Types, enums, optional properties, nested objects, arrays and anyOf, on one tool."""
    from chat_autoparser.analyzer import analyze_template
    tools = [{"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "required": ["when", "seats"],
        "properties": {"when": {"type": "string"}, "seats": {"type": "integer"},
                       "class": {"type": "string", "enum": ["eco", "biz"]},
                       "who": {"type": "array", "items": {"type": "object", "properties": {
                           "name": {"type": "string"}}, "required": ["name"]}},
                       "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}]
    a = analyze_template("templates/chatml-think.jinja")
    checker = LLGuidanceChecker(generate_parser(a, tools=tools).grammar)

    def call(args: str) -> str:
        return '<tool_call>\n{"name": "book", "arguments": ' + args + '}\n</tool_call>'
    assert checker.accepts(call('{"when": "today", "seats": 2}'))
    assert checker.accepts(call('{"when": "today", "seats": 2, "class": "biz", "who": [{"name": "A"}], '
                                '"note": null}'))
    assert not checker.accepts(call('{"when": "today"}'))                       # required missing
    assert not checker.accepts(call('{"when": "today", "seats": 2.5}'))         # integer
    assert not checker.accepts(call('{"when": "today", "seats": 2, "class": "first"}'))  # enum
    assert not checker.accepts(call('{"when": "today", "seats": 2, "who": [{}]}'))      # nested required
    assert not checker.accepts(call('{"when": "today", "seats": 2, "note": 3}'))        # anyOf


def test_optional_properties_every_subset():
    """Optional properties in any present subset. Regression: when the properties after an
    optional one were all plain terminals, llguidance lexed them as one greedy lexeme that
    swallowed the separator and refused the next key."""
    import itertools
    from chat_autoparser.analyzer import analyze_template
    props = {"q": {"type": "string"}, "filters": {"type": "object", "additionalProperties": {}},
             "limit": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}}
    values = {"filters": '{"a": [1]}', "limit": "2.5", "tags": '["x", "y"]'}
    tools = [{"type": "function", "function": {"name": "find", "parameters": {
        "type": "object", "properties": props, "required": ["q"]}}}]
    checker = LLGuidanceChecker(generate_parser(analyze_template("templates/chatml-think.jinja"),
                                                tools=tools).grammar)
    optional = list(values)
    for n in range(len(optional) + 1):
        for subset in itertools.combinations(optional, n):
            args = ", ".join(['"q": "z"'] + [f'"{k}": {values[k]}' for k in subset])
            text = '<tool_call>\n{"name": "find", "arguments": {' + args + '}}\n</tool_call>'
            assert checker.accepts(text), subset
            if subset:  # out of order is refused (the template writes keys in schema order)
                shuffled = ", ".join([f'"{k}": {values[k]}' for k in subset] + ['"q": "z"'])
                assert not checker.accepts(text.replace(args, shuffled)), subset


def test_deepcopy_of_tools_is_not_needed():
    """The generator does not change the tools it is given."""
    from chat_autoparser.analyzer import analyze_template
    tools = copy.deepcopy(RT_TOOLS)
    generate_parser(analyze_template("templates/chatml-think.jinja"), tools=tools)
    assert tools == RT_TOOLS


def test_section_end_holding_the_turn_end():
    """A section end written together with the end-of-turn marker (``]</tool_call></s>``): the
    model stops at ``</s>`` (a server strips it), so the parser reads the calls without it and
    the grammar ends before it."""
    from dataclasses import replace

    from chat_autoparser.analyzer import analyze_template, from_string
    t = ("{% for m in messages %}{% if m.role == 'user' %}<|user|>\n{{ m.content }}</s>\n"
         "{% elif m.role == 'assistant' %}<|assistant|>\n{% if m.tool_calls %}<tool_call>[{% for tc in m.tool_calls %}"
         "{% if not loop.first %}, {% endif %}{\"name\": \"{{ tc.function.name }}\", \"arguments\": "
         "{{ tc.function.arguments | tojson }}}{% endfor %}]</tool_call></s>\n{% else %}{{ m.content }}</s>\n{% endif %}"
         "{% elif m.role == 'tool' %}<|tool|>\n{{ m.content }}</s>\n{% endif %}{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    a = analyze_template(from_string(t, name="turn-end-in-section.jinja"))
    ts = a.tool_call_structure
    assert ts.tool_section_end == "]</tool_call>"
    a = replace(a, tool_call_structure=replace(ts, tool_section_end="]</tool_call></s>\n"))  # as some analyses give it
    params = generate_parser(a, tools=RT_TOOLS)
    call = '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>'
    for out in (call, call + "</s>\n"):
        msg = params.parser.parse(out)
        assert msg["content"] is None and "parse_error" not in msg, out
        assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
    checker = LLGuidanceChecker(params.grammar)
    assert checker.accepts(call) and not checker.accepts(call + "</s>")
