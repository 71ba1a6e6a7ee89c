"""Render → parse fixed point over the corpus (``generator.verify.fixed_point``).

For every template and every scenario it supports, the generated part of a rendered turn is
parsed back and must equal the message (modulo what the template itself drops, which the
harness reports), and rendering the parsed message must give the raw render again
(reconstructability, a string-level look at prefix-cache safety).

``KNOWN`` lists the (template, scenario) pairs that fail today, each with the reason and the
failure it excuses (a text its problems must contain). The list is exact: a new failure fails the
test, and so do a listed pair that now passes (take it off) and one that fails otherwise.
"""

from __future__ import annotations

import pytest

from chat_autoparser.generator.verify.fixed_point import SCENARIOS

UNESCAPED = "the template writes string arguments in double quotes without escaping the quotes inside them"
JOINED = "the template joins keyword arguments without commas (city=\"Paris\"days=3): the output is ambiguous"
THINK_FLAG = ("thinking is switched by /think and /no_think inside the system message, not by a template "
              "variable; with thinking on, the template writes a past answer inside an unclosed <think> "
              "block, so the answer reads back as reasoning")

def _known(reason: str, failure: str | tuple[str, ...], *scenarios: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Scenarios excused by ``reason`` whose every problem holds one of ``failure`` (a text, or
    several), each of which some problem holds."""
    return {s: (reason, (failure,) if isinstance(failure, str) else failure) for s in scenarios}


# the re-rendered past answer loses what the template wrote inside its unclosed <think> block
NEMOTRON_REBUILT = "raw output:     '<SPECIAL_11>Assistant\\n<think>\\nThe answer'\n  parsed message: ''"
JUDGE = ("a judge template: it writes a judge protocol naming the last speaker after the conversation, so the "
         "spliced turn carries the protocol for an assistant where the prompt has it for a user")
JUDGE_CONTENT = "content \"The answer is 42.<|start_of_role|>judge_protocol<|end_of_role|>"
NONE_READ = "the template writes reasoning, and the parser for thinking on reads none (REASONING_NONE"
THINKING_KWARG = ("the template turns reasoning on with a switch named `thinking`, which the setting the parser takes "
                  "for thinking on does not set, so it reads no reasoning (the request's chat_template_kwargs: "
                  "issue 28)")

KNOWN: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "llama.cpp/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": _known(
        "the template writes an assistant header after every conversation, whatever add_generation_prompt "
        "says, and a shorter one (no empty thinking block) with thinking on: the rendered turn ends with that "
        "header, which the analysis (learning the end of the turn under the default setting) reads as content; "
        "with thinking on, the reasoning opener the template writes is taken for the prompt's",
        "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'", "content", "reasoning+content", "reasoning+tool_calls"),
    "extra/microsoft-OptiMind-SFT.jinja": _known(
        "with thinking off the template writes content before a call on the analysis channel "
        "(`<|channel|>analysis<|message|>...<|end|>`), which the parser built for that setting does not expect; "
        "the whole output is read as reasoning. Seen once the probe tools carried parameter descriptions, "
        "which this template prints unguarded (before, the scenario rendered nothing)",
        ("unexpected reasoning 'The answer is 42.<|end|>", "content None != 'The answer is 42.'"), "content+tool_calls"),
    "extra/Motif-Technologies-Motif-3-Beta.jinja": _known(
        "the template writes empty arguments as nothing ('\"arguments\": }'), which is not JSON (checked on the "
        "history's turn spliced onto the prompt)", "parse error: invalid JSON (kept as raw text)", "empty_arguments"),
    "llama.cpp/MiniMax-M3.jinja": _known(
        "nested object and array values are written as nested tagged units; the analysis reads one level of "
        "units (our limitation)", ("parameter 'item' of 'search_docs' written twice", "'filters': ']<]minimax[>[<nested>"),
        "tricky_arguments"),
    "llama.cpp/NVIDIA-Nemotron-Nano-v2.jinja": {
        **_known(THINK_FLAG, NEMOTRON_REBUILT, "content"),
        **_known(THINK_FLAG, "content '<SPECIAL_11>Assistant\\n' != 'The answer is 42.'", "content+tool_calls")},
    "extra/nvidia-NVIDIA-Nemotron-Nano-12B-v2.jinja": _known(THINK_FLAG, NEMOTRON_REBUILT, "content", "content+tool_calls"),
    "extra/google-gemma-3-27b-it-vllm_tool_gemma3_pythonic.jinja": {
        **_known(JOINED, "'days': '3metric=true'", "tool_call", "parallel_tool_calls", "content+tool_calls"),
        **_known(JOINED, "'limit': '-7tags=", "tricky_arguments")},
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-vllm_tool_llama4_pythonic.jinja": _known(
        UNESCAPED, ("arguments {'query': 'Zürich '}", "unexpected content 'quoted\"", "parse error: '<|eot|>' at 167 before '('"),
        "tricky_arguments"),
    "extra/LiquidAI-LFM2.5-VL-450M.jinja": _known(UNESCAPED, ("arguments {'query': 'Zürich '}", "unexpected content 'quoted\""),
                                                  "tricky_arguments"),
    "extra/muse-glimmer-vllm_tool_muse_glimmer.jinja": {
        **_known("the template writes reasoning on a tool-call turn as a message addressed to 'self' in the "
                 "channel header, which the analysis does not model",
                 ("unexpected content '<|message|>First, think it through.<|start|>assistant'",
                  "reasoning None != 'First, think it through.'", "2 tool calls parsed, 1 expected",
                  "call name 'self' != 'get_weather'", "arguments {} != {'city': 'Paris'",
                  "parse error: expected '<atem:function_calls>'"), "reasoning+tool_calls"),
        **_known("the analysis takes the system block for the generation prompt and the assistant header with "
                 "its 'to=user' recipient for the content's opener, so an answer written after the real "
                 "generation prompt keeps '<|message|>' (seen once the turn was spliced onto the prompt)",
                 ("content '<|message|>", "1 tool calls parsed, 0 expected", "parse error: expected '<atem:function_calls>'"),
                 "content"),
        **_known("the analysis takes the system block for the generation prompt and the assistant header with "
                 "its 'to=user' recipient for the content's opener (seen once the turn was spliced onto the prompt)",
                 ("content '<|message|>", "reasoning None != 'First, think it through.'",
                  "1 tool calls parsed, 0 expected", "parse error: expected '<atem:function_calls>'"), "reasoning+content")},
    "extra/Featherless-Chat-Models-llama2-13b-chat-hf.jinja": _known(
        "the template prints a fragment of its own code (\" == 'user') \") before an answer",
        "content \" == 'user') The answer is 42.\"", "content"),
    "extra/internlm-Intern-S1-mini.jinja": _known(
        "the forced-open prompt ends at '<think>' while the template writes an empty block as "
        "'<think>\\n\\n</think>': the newline it writes after '<think>' reads back as reasoning",
        "unexpected reasoning '\\n'", "content", "content+tool_calls"),
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-axolotl.jinja": _known(
        "with content, the template wraps the answer in <|python_start|>...<|python_end|> and writes the call "
        "as bare JSON with 'parameters': a form the analysis, which learns calls from turns without content, "
        "does not know", ("content '<|python_start|>The answer is 42.<|python_end|>", "0 tool calls parsed, 1 expected"),
        "content+tool_calls"),
    "extra/ibm-granite-granite-guardian-3.3-8b.jinja": {
        **_known(JUDGE, JUDGE_CONTENT, "content"),
        **_known(JUDGE + "; and the analysis misses the template's reasoning (its MISSED entry says how)",
                 (JUDGE_CONTENT, NONE_READ), "reasoning+content")},
    # the template writes reasoning (applicability's source facts) that the parser for thinking on
    # does not read: the analysis misses listed in MISSED, and the templates switched by `thinking`
    **{name: _known("the analysis misses the template's reasoning (its MISSED entry says how)", NONE_READ,
                    "reasoning+content", *(("reasoning+tool_calls",) if calls else ()))
       for name, calls in (("extra/CohereLabs-c4ai-command-a-03-2025-axolotl-rag.jinja", True),
                           ("extra/CohereLabs-c4ai-command-a-03-2025-axolotl-tool_use.jinja", True),
                           ("extra/CohereLabs-c4ai-command-a-03-2025-axolotl.jinja", False),
                           ("extra/Motif-Technologies-Motif-2.6B.jinja", False),
                           ("extra/QCRI-Fanar-1-9B-Instruct.jinja", False),
                           ("extra/ServiceNow-AI-Apriel-1.5-15b-Thinker.jinja", True),
                           ("llama.cpp/unsloth-Apriel-1.5.jinja", True),
                           ("extra/microsoft-Phi-4-reasoning-vision-15B.jinja", False),
                           ("extra/microsoft-Phi-4-reasoning.jinja", False),
                           ("extra/microsoft-phi-4-axolotl.jinja", False),
                           ("extra/skt-A.X-4.0-Light.jinja", True))},
    "extra/inclusionAI-SingGuard-2b.jinja": _known(
        "the analysis misses the template's reasoning (see MISSED)", NONE_READ, "reasoning+tool_calls"),
    **{name: _known(THINKING_KWARG, NONE_READ, "reasoning+content", *(("reasoning+tool_calls",) if calls else ()))
       for name, calls in (("extra/NousResearch-Hermes-4-14B.jinja", True), ("extra/NousResearch-Hermes-4.3-36B.jinja", True),
                           ("extra/ibm-granite-granite-speech-3.3-2b.jinja", True),
                           ("extra/ibm-granite-granite-speech-3.3-8b.jinja", False),
                           ("llama.cpp/ibm-granite-granite-3.3-2B-Instruct.jinja", True))},
    "extra/tencent-DeepSeek-V3.1-Terminus-W4AFP8.jinja": _known(
        THINKING_KWARG, "the parser for thinking on reads none (REASONING_DISABLED", "reasoning+content",
        "reasoning+tool_calls"),
    "extra/tiiuae-Falcon-H1-Tiny-Tool-Calling-90M.jinja": _known(
        "the template ends the content's turn ('\\n<|im_end|>') and writes the call after it with no header of its "
        "own: the parser keeps the newline in content, and the re-rendered turn has it twice",
        "parsed message: '\\n<|im_end|><tool_call>", "content+tool_calls"),
}


def _failures(fixed: dict) -> dict[str, list[str]]:
    out = {}
    for name, r in fixed.items():
        if r.skipped:
            continue
        if not r.ok:
            out[name] = list(r.problems)
        elif r.reconstructs is False:
            out[name] = ["does not reconstruct the render:\n" + r.reconstruct_diff]
    return out


def _otherwise(problems: list[str], texts: tuple[str, ...]) -> list[str]:
    """What of a failure its KNOWN texts do not say: problems none of them is in, and texts in
    no problem."""
    return [p for p in problems if not any(t in p for t in texts)] + \
        [f"(KNOWN text not seen: {t!r})" for t in texts if not any(t in p for p in problems)]


def test_fixed_point(corpus_entry, fixed_points):
    fixed = fixed_points(corpus_entry.path)
    if not fixed:
        pytest.skip("no analysis (its error is checked by test_golden)")
    assert set(fixed) == set(SCENARIOS)
    failures = _failures(fixed)
    known = KNOWN.get(corpus_entry.name, {})
    new = {s: why for s, why in failures.items() if s not in known}
    fixed_now = sorted(s for s in known if s not in failures)
    otherwise = {s: odd for s, (_, texts) in known.items() if s in failures and (odd := _otherwise(failures[s], texts))}
    assert not new, f"{corpus_entry.name}: " + "\n".join(f"{s}: {'; '.join(why)}" for s, why in new.items())
    assert not fixed_now, f"{corpus_entry.name}: {fixed_now} pass now: take them off KNOWN"
    assert not otherwise, f"{corpus_entry.name}: fails otherwise than KNOWN says: " + "\n".join(
        f"{s}: {'; '.join(odd)}" for s, odd in otherwise.items())


def test_parser_given_the_prompt_reads_the_same(corpus_entry, fixed_points, analyzed):
    """A server hands the parser the prompt it rendered (``prompt=``; the vLLM plugin does): from
    where that prompt ends, the parser reads every held fixed point's message, as the parser of
    the setting the prompt was rendered under does (ids aside: they come from the text)."""
    from chat_autoparser.generator import generate_parser
    from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
    held = {s: fp for s, fp in fixed_points(corpus_entry.path).items() if fp.ok and not fp.skipped}
    if not held:
        pytest.skip("no scenario holds its fixed point (test_fixed_point says why)")
    analysis = analyzed(corpus_entry.path)

    def plain(m: dict) -> dict:
        calls = [c["function"] for c in m.get("tool_calls") or []]
        return {**{k: v for k, v in m.items() if k not in ("tool_calls", "parse_warnings")}, "calls": calls}
    wrong = []
    for name, fp in held.items():
        params = generate_parser(analysis, tools=RT_TOOLS if fp.with_tools else None, prompt=fp.prompt)
        got = params.parser.parse(fp.generated)
        if plain(got) != plain(fp.parsed):
            wrong.append(f"{name} (start {params.start}): {plain(got)} != {plain(fp.parsed)}")
    assert not wrong, "\n".join(wrong)


def test_known_entries_are_corpus_templates(corpus):
    names = {e.name for e in corpus}
    assert set(KNOWN) <= names
    assert all(set(v) <= set(SCENARIOS) for v in KNOWN.values())


# --------------------------------------------------------------------------- what the template writes

INSTRUCTED_THINK = ("the default system prompt tells the model to write '<think> {Thought section} </think> "
                    "{Solution section}'; no render carries a message's reasoning and the analysis, finding "
                    "no reasoning, parses the model's <think> block as content")
TOOL_PLAN = ("the template writes a tool-call turn's plan ('tool_plan', not an API field) in "
             "<|START_THINKING|>...<|END_THINKING|> and its instructions ask for that block on every turn; the "
             "analysis finds no reasoning, so the model's thinking block is read as content")
# Templates whose source writes something the analysis does not find, by the failure seen.
MISSED: dict[str, str] = {
    "llama.cpp/unsloth-Apriel-1.5.jinja": "reasoning: the template writes a message's 'thought' field (not an API "
                                          "field) in <thinking>...</thinking> before its calls and asks for "
                                          "that block in its tool instructions; the analysis finds no reasoning",
    "extra/ServiceNow-AI-Apriel-1.5-15b-Thinker.jinja": "reasoning: the template writes a message's 'thought' "
                                                        "field in <thinking>...</thinking> before its calls; "
                                                        "the analysis finds no reasoning",
    "extra/inclusionAI-SingGuard-2b.jinja": "reasoning: <thinking_type>...</thinking_type> holds a setting's "
                                            "value (sg_thinking_type), not the model's reasoning: the source "
                                            "check takes the pair for reasoning markers",
    "extra/microsoft-Phi-4-reasoning.jinja": "reasoning: " + INSTRUCTED_THINK,
    "extra/microsoft-Phi-4-reasoning-vision-15B.jinja": "reasoning: " + INSTRUCTED_THINK,
    "extra/microsoft-phi-4-axolotl.jinja": "reasoning: " + INSTRUCTED_THINK,
    "extra/Motif-Technologies-Motif-2.6B.jinja": "reasoning: the template moves what a past answer writes before "
                                                 "'</think>' out of its content, and writes '<think>' only there; "
                                                 "the analysis finds no reasoning",
    "extra/skt-A.X-4.0-Light.jinja": "reasoning: the template drops what a past answer writes before '</think>' "
                                     "and writes '<think>' nowhere; the analysis finds no reasoning",
    "extra/ibm-granite-granite-guardian-3.3-8b.jinja": "reasoning: the prompt ends in a judge header carrying a "
                                                       "think flag ('judge{no_think}', 'judge{think}' with "
                                                       "think=True) and the template writes no reasoning markers; "
                                                       "the analysis finds no reasoning",
    "extra/QCRI-Fanar-1-9B-Instruct.jinja": "reasoning: the template writes messages of role 'thinking' (not an "
                                            "API role) in <think>...</think>; the analysis finds no reasoning",
    "extra/CohereLabs-c4ai-command-a-03-2025-axolotl.jinja": "reasoning: " + TOOL_PLAN,
    "extra/CohereLabs-c4ai-command-a-03-2025-axolotl-rag.jinja": "reasoning: " + TOOL_PLAN,
    "extra/CohereLabs-c4ai-command-a-03-2025-axolotl-tool_use.jinja": "reasoning: " + TOOL_PLAN,
    "extra/nvidia-NVIDIA-Nemotron-Nano-12B-v2.jinja": "tool calls: the template writes a call only when a tool "
                                                      "result follows it (it reads the next message); the "
                                                      "analysis renders calls alone and reads the syntax from the "
                                                      "instructions instead",
    "extra/nvidia-NVIDIA-Nemotron-Nano-9B-v2-Japanese.jinja": "tool calls: the template writes a call only when a "
                                                              "tool result follows it; the analysis reads the syntax "
                                                              "from the instructions instead",
}


def missed(template, analysis) -> list[str]:
    """What the template writes (by its renders and source) that the analysis does not find."""
    from chat_autoparser.generator.verify.applicability import source_facts
    facts, ts = source_facts(template), analysis.tool_call_structure
    out = []
    if facts.writes_reasoning and not analysis.content_structure.reasoning_end:
        out.append("reasoning")
    if facts.renders_calls and not (ts.supports_tools and ts.source == "rendered"):
        out.append("tool calls")
    if facts.renders_parallel and ts.supports_tools and not ts.supports_parallel:
        out.append("parallel calls")
    return out


def test_analysis_finds_what_the_template_writes(corpus_entry, analyzed):
    """Oracle 2's applicability, checked on its own: a template that renders calls, or writes
    reasoning (a message's reasoning shows in its turn, or its source writes a pair of markers
    named for it), has an analysis that finds them. The fixed point runs those scenarios
    whatever the analysis says, so a miss shows there too."""
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.analyzer.structures import TemplateAnalysis
    a = analyzed(corpus_entry.path)
    if not isinstance(a, TemplateAnalysis):
        pytest.skip("no analysis (its error is checked by test_golden)")
    misses = missed(load_template(corpus_entry.path), a)
    known = MISSED.get(corpus_entry.name)
    if known is None:
        assert not misses, f"{corpus_entry.name}: the template writes {misses}, the analysis does not find them"
    else:
        assert [known.split(":")[0]] == misses, f"{corpus_entry.name}: {misses} missed, KNOWN says {known!r}"


def test_missed_entries_are_corpus_templates(corpus):
    assert set(MISSED) <= {e.name for e in corpus}


@pytest.fixture(scope="module")
def chatml_analysis():
    from chat_autoparser.analyzer import analyze_template, load_template
    t = load_template("templates/chatml-think.jinja")
    return t, analyze_template(t)


def _wrong(analysis, what: str):
    from dataclasses import replace
    from chat_autoparser.analyzer.structures import ReasoningMode, ToolCallStructure
    if what == "reasoning":
        cs = replace(analysis.content_structure, reasoning_start="", reasoning_end="",
                     reasoning_mode=ReasoningMode.NONE, reasoning_source="")
        return replace(analysis, content_structure=cs)
    return replace(analysis, tool_call_structure=ToolCallStructure(supports_tools=False, reason="wrong on purpose"))


@pytest.mark.parametrize("what, scenario", [("reasoning", "reasoning+content"), ("tools", "tool_call"),
                                            ("tools", "parallel_tool_calls")])
def test_a_wrong_analysis_fails(chatml_analysis, what, scenario):
    """An analysis that misses reasoning or tools the template writes fails its scenarios (they
    are not skipped as not applying) and the applicability oracle."""
    from chat_autoparser.generator.verify.fixed_point import fixed_point
    template, right = chatml_analysis
    assert fixed_point(template, right, scenario).ok and not missed(template, right)
    wrong = _wrong(right, what)
    r = fixed_point(template, wrong, scenario)
    assert not r.skipped and not r.ok, r
    assert missed(template, wrong) == [{"tools": "tool calls"}.get(what, what)]


def test_a_wrong_corpus_analysis_fails(corpus, analyzed):
    """The same on a corpus template: the first (by name) that renders calls and writes
    reasoning, chosen by the template alone, whose scenarios pass with the right analysis and
    render all they carry (reasoning in ``reasoning_content``)."""
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.generator.verify.applicability import source_facts
    from chat_autoparser.generator.verify.fixed_point import fixed_point

    def fits(e) -> bool:
        f = source_facts(load_template(e.path))
        if e.name in MISSED or not (f.renders_calls and f.renders_reasoning):
            return False
        runs = [fixed_point(load_template(e.path), analyzed(e.path), s) for s in ("reasoning+content", "tool_call")]
        return all(r.ok and not r.skipped and not r.template_drops for r in runs)

    entry = next((e for e in sorted(corpus, key=lambda e: e.name) if fits(e)), None)
    assert entry is not None, "no corpus template renders calls and reasoning and passes both scenarios"
    template, right = load_template(entry.path), analyzed(entry.path)
    for what, scenario in (("reasoning", "reasoning+content"), ("tools", "tool_call")):
        r = fixed_point(template, _wrong(right, what), scenario)
        assert not r.skipped and not r.ok, (entry.name, what, r)
        assert missed(template, _wrong(right, what)), (entry.name, what)


# --------------------------------------------------------------------------- the splice

@pytest.fixture(scope="module")
def chatml_think():
    from chat_autoparser.analyzer import analyze_template
    return analyze_template("templates/chatml-think.jinja")


@pytest.mark.parametrize("prompt_tail, turn, reasoning, want", [
    # the prompt opens a block the history leaves out: the model closes it (with its reasoning)
    ("<think>\n", "<tool_call>X</tool_call><|im_end|>\n", False, "\n</think>\n<tool_call>X</tool_call><|im_end|>\n"),
    ("<think>\n", "Hi<|im_end|>\n", True, "First, think it through.\n</think>\nHi<|im_end|>\n"),
    # the prompt writes an empty block the history leaves out: the model goes on after it
    ("<think>\n\n</think>\n\n", "Hi<|im_end|>\n", False, "Hi<|im_end|>\n"),
    ("\n", "   Hi<|im_end|>\n", False, "   Hi<|im_end|>\n"),
    # the history writes the block itself: the model goes on inside the one the prompt opened
    ("<think>\n", "\n<think>\nhm\n</think>\nHi<|im_end|>\n", False, "\nhm\n</think>\nHi<|im_end|>\n"),
    # the history writes reasoning inside the block the prompt closes: nothing to splice
    ("<think>\n\n</think>\n\n", "<think>\nhm\n</think>\n\nHi<|im_end|>\n", True, None),
    # a header the history writes otherwise: the turn after the longest tail of the prompt it writes
    ("<|start|>assistant\n", "<|im_start|>assistant\nHi<|im_end|>\n", False, "Hi<|im_end|>\n"),
    ("<|assistant|>\n", "<|startofturn|><|assistant|><tool_call>X</tool_call>", False, "<tool_call>X</tool_call>"),
    # a system block or user-side flag the prompt places before the new turn, then a block it opens
    ("[SYS]be brief[/SYS]Hi[/INST]", "Hi[/INST][CALLS]X</s>", False, "[CALLS]X</s>"),
    # ... but not a flag the turn never writes, outside the analysis' generation prompt
    ("/no_think <think>\n", "Hi<|im_end|>\n", False, None),
    ("/think ASSISTANT:<think>\n", "ASSISTANT:Hi<|im_end|>\n", True, "First, think it through.\n</think>\nHi<|im_end|>\n"),
    # an end marker alone that the history writes after its own header: the model goes on after it
    ("<|A|>  </think>", "  <|A|></think>   <|calls|>X", False, "   <|calls|>X"),
    # a header the history never writes, and a message written inside another turn: no splice
    ("<judge>\n", "<tool_call>X</tool_call><|im_end|>\n", False, None),
    ("<|im_end|>\n<|im_start|>assistant\n", "[assistant]: Hi\n<|im_end|>\n", False, None),
    # an empty turn: nothing to splice
    ("<|start|>assistant\n", "  \n", False, None),
])
def test_spliced_text(chatml_think, prompt_tail, turn, reasoning, want):
    from chat_autoparser.generator.verify.fixed_point import spliced_text
    head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert spliced_text(chatml_think, head + prompt_tail, head + turn, reasoning) == want


def test_spliced_text_after_the_generation_prompts_own_text(chatml_think):
    """Text the analysis' generation prompt adds after the header the history writes too (a
    forced opener the model goes on from): the turn right after it, inside reasoning when the
    setting opens it without a marker."""
    import dataclasses
    from chat_autoparser.generator.verify.fixed_point import REASONING, spliced_text
    head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    judged = dataclasses.replace(chatml_think, generation_prompt="<|im_start|>assistant\n<judge>\n")
    assert spliced_text(judged, head + "<judge>\n", head + "<tool_call>X</tool_call>", False) == "<tool_call>X</tool_call>"
    steps = dataclasses.replace(chatml_think, generation_prompt="<|im_start|>assistant\nSteps:\n")
    assert spliced_text(steps, head + "Steps:\n", head + "Hi", True, forced_open=True) == \
        REASONING + chatml_think.content_structure.reasoning_end + "Hi"


@pytest.mark.parametrize("generated, mode, want", [
    # a block of the analysis' own markers before the turn
    ("Hi<|im_end|>\n", "OPTIONAL", "<think>\nR\n</think>\nHi<|im_end|>\n"),
    # inside the empty block the turn writes
    ("<think>\n\n</think>\n\nHi<|im_end|>\n", "OPTIONAL", "<think>\nR\n</think>\n\nHi<|im_end|>\n"),
    # inside the block the prompt opened, closed by the analysis' end marker
    ("Hi<|im_end|>\n", "FORCED_OPEN", "R\n</think>\nHi<|im_end|>\n"),
    ("\n</think>\nHi<|im_end|>\n", "FORCED_OPEN", "R\n</think>\nHi<|im_end|>\n"),
    # a setting that reads no reasoning: nothing to write
    ("Hi<|im_end|>\n", "DISABLED", None),
    ("Hi<|im_end|>\n", "NONE", None),
])
def test_with_reasoning(chatml_think, generated, mode, want):
    from chat_autoparser.analyzer.structures import ReasoningMode
    from chat_autoparser.generator.verify.fixed_point import REASONING, with_reasoning
    got = with_reasoning(chatml_think, generated, ReasoningMode[mode])
    assert got == (want.replace("R", REASONING, 1) if want else None)
