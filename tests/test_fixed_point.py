"""Render → parse fixed point over the corpus (``generator.verify.fixed_point``).

For every template and every scenario it supports, the generated part of a rendered turn is
parsed back and must equal the message (modulo what the template itself drops, which the
harness reports), and rendering the parsed message must give the raw render again
(reconstructability, a string-level look at prefix-cache safety).

``KNOWN`` lists the (template, scenario) pairs that fail today, each with the reason. The list
is exact: a new failure fails the test, and so does a listed pair that now passes (take it off).
"""

from __future__ import annotations

import pytest

from generator.verify.fixed_point import SCENARIOS

UNESCAPED = "the template writes string arguments in double quotes without escaping the quotes inside them"
THINK_FLAG = ("thinking is switched by /think and /no_think inside the system message, not by a template "
              "variable; with thinking on, the template writes a past answer inside an unclosed <think> "
              "block, so the answer reads back as reasoning")

KNOWN: dict[str, dict[str, str]] = {
    "llama.cpp/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": dict.fromkeys(
        ("content", "reasoning+content", "reasoning+tool_calls"),
        "the template writes an assistant header after every conversation, whatever add_generation_prompt "
        "says, and a shorter one (no empty thinking block) with thinking on: the rendered turn ends with that "
        "header, which the analysis (learning the end of the turn under the default setting) reads as content; "
        "with thinking on, the reasoning opener the template writes is taken for the prompt's"),
    "extra/microsoft-OptiMind-SFT.jinja": {
        "content+tool_calls": "with thinking off the template writes content before a call on the analysis "
                              "channel (`<|channel|>analysis<|message|>...<|end|>`), which the parser built "
                              "for that setting does not expect; the whole output is read as reasoning. "
                              "Seen once the probe tools carried parameter descriptions, which this "
                              "template prints unguarded (before, the scenario rendered nothing)"},
    "extra/Motif-Technologies-Motif-3-Beta.jinja": {
        "empty_arguments": "the template writes empty arguments as nothing ('\"arguments\": }'), which is not JSON "
                           "(checked on the history's turn spliced onto the prompt)"},
    "llama.cpp/MiniMax-M3.jinja": {
        "tricky_arguments": "nested object and array values are written as nested tagged units; the "
                            "analysis reads one level of units (our limitation)"},
    "llama.cpp/NVIDIA-Nemotron-Nano-v2.jinja": dict.fromkeys(
        ("content", "reasoning+content", "content+tool_calls"), THINK_FLAG),
    "extra/nvidia-NVIDIA-Nemotron-Nano-12B-v2.jinja": dict.fromkeys(("content", "reasoning+content"), THINK_FLAG),
    "extra/nvidia-NVIDIA-Nemotron-Nano-9B-v2-Japanese.jinja": {"reasoning+content": THINK_FLAG},
    "extra/google-gemma-3-27b-it-vllm_tool_gemma3_pythonic.jinja": dict.fromkeys(
        ("tool_call", "parallel_tool_calls", "content+tool_calls", "tricky_arguments"),
        "the template joins keyword arguments without commas (city=\"Paris\"days=3): the output is ambiguous"),
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-vllm_tool_llama4_pythonic.jinja": {
        "tricky_arguments": UNESCAPED},
    "extra/LiquidAI-LFM2.5-VL-450M.jinja": {"tricky_arguments": UNESCAPED},
    "extra/muse-glimmer-vllm_tool_muse_glimmer.jinja": {
        "reasoning+tool_calls": "the template writes reasoning on a tool-call turn as a message addressed "
                                "to 'self' in the channel header, which the analysis does not model"},
    "extra/Featherless-Chat-Models-llama2-13b-chat-hf.jinja": {
        "content": "the template prints a fragment of its own code (\" == 'user') \") before an answer"},
    "extra/internlm-Intern-S1-mini.jinja": dict.fromkeys(
        ("content", "content+tool_calls"),
        "the forced-open prompt ends at '<think>' while the template writes an empty block as "
        "'<think>\\n\\n</think>': the newline it writes after '<think>' reads back as reasoning"),
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-axolotl.jinja": {
        "content+tool_calls": "with content, the template wraps the answer in <|python_start|>...<|python_end|> "
                              "and writes the call as bare JSON with 'parameters': a form the analysis, "
                              "which learns calls from turns without content, does not know"},
}


def _failures(fixed: dict) -> dict[str, str]:
    out = {}
    for name, r in fixed.items():
        if r.skipped:
            continue
        if not r.ok:
            out[name] = "; ".join(r.problems)
        elif r.reconstructs is False:
            out[name] = "does not reconstruct the render:\n" + r.reconstruct_diff
    return out


def test_fixed_point(corpus_entry, fixed_points):
    fixed = fixed_points(corpus_entry.path)
    if not fixed:
        pytest.skip("no analysis (its error is checked by test_golden)")
    assert set(fixed) == set(SCENARIOS)
    failures = _failures(fixed)
    known = KNOWN.get(corpus_entry.name, {})
    new = {s: why for s, why in failures.items() if s not in known}
    fixed_now = sorted(s for s in known if s not in failures)
    assert not new, f"{corpus_entry.name}: " + "\n".join(f"{s}: {why}" for s, why in new.items())
    assert not fixed_now, f"{corpus_entry.name}: {fixed_now} pass now: take them off KNOWN"


def test_known_entries_are_corpus_templates(corpus):
    names = {e.name for e in corpus}
    assert set(KNOWN) <= names
    assert all(set(v) <= set(SCENARIOS) for v in KNOWN.values())


# --------------------------------------------------------------------------- the splice

@pytest.fixture(scope="module")
def chatml_think():
    from analyzer import analyze_template
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
    # anything else the prompt adds (a header, a flag) is not spliced
    ("<|start|>assistant\n", "<|im_start|>assistant\nHi<|im_end|>\n", False, None),
    ("/no_think <think>\n", "Hi<|im_end|>\n", False, None),
])
def test_spliced_text(chatml_think, prompt_tail, turn, reasoning, want):
    from generator.verify.fixed_point import spliced_text
    head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert spliced_text(chatml_think, head + prompt_tail, head + turn, reasoning) == want
