"""Every exporter over the corpus, checked by the tool that consumes its output
(:mod:`generator.verify.exports`): transformers' ``parse_response`` reads our HF response
template, llguidance compiles our structural tags (as vLLM's guidance backend does) and our
GBNF and Lark grammars, and the Edge-LLM JSON formats the standard conversations exactly as the
Jinja template does. A template a format cannot say is "not expressible" with the reason (counted
by ``benchmarks/export_counts.py``); failures are the exact list :data:`KNOWN`, with the reason.
"""

from __future__ import annotations

import pytest

from analyzer import load_template
from analyzer.errors import ChatAutoparserError
from generator.export import NotExpressible, edgellm
from generator.verify.exports import verify_exports

NEXT_OPENER = ("calls with no closer of their own end where the next call opens (a lookahead); transformers' "
               "streaming does not end a region at a lookahead, so the next call runs into the arguments")
AFTER_STOP = ("the rendered output goes on after the turn's stop marker (the template's final suffix); transformers' "
              "streaming closes content at the stop marker before the longer closer can match and reads the rest "
              "as content (a server stops at the stop marker)")

ARGS_FIRST = ("the template's instructions put the arguments before the name: the grammar ties each tool's "
              "arguments to its name only for the first call, and refuses a second call's arguments")

KNOWN: dict[str, dict[str, str]] = {
    "llama.cpp/Reka-Edge.jinja": {
        "structural-tag": "the template writes arguments with \\uXXXX escapes; llguidance's JSON strings refuse them"},
    "extra/RekaAI-reka-edge-2603.jinja": {
        "structural-tag": "the template writes arguments with \\uXXXX escapes; llguidance's JSON strings refuse them"},
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-vllm_tool_llama4_json.jinja": {
        "hf": "parallel calls: the json parser gets an empty region (calls with no opener or closer of their own)",
        "hf-stream": "the same as whole (hf)"},
    "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-axolotl.jinja": {
        "hf": "parallel calls: the json parser gets an empty region (calls with no opener or closer of their own)",
        "hf-stream": "the same as whole (hf)"},
    "extra/microsoft-Phi-4-mini-instruct-vllm_tool_phi4_mini.jinja": {
        "hf": "parallel calls separated by a comma inside one section: the json parser reads two objects as one",
        "hf-stream": "the same as whole (hf)"},
    "extra/inclusionAI-SingGuard-2b.jinja": {
        "hf": "content before a call is dropped by parse_response (the content region ends where the call opens)",
        "hf-stream": "the same as whole (hf)"},
    "extra/meituan-longcat-LongCat-2.0.jinja": {
        "hf": "the start anchor is not found in the prefix, so the prompt's text becomes content",
        "hf-stream": "the same as whole (hf)"},
    "llama.cpp/Mistral-Small-3.2-24B-Instruct-2506.jinja": {"hf-stream": NEXT_OPENER},
    "llama.cpp/meetkai-functionary-medium-v3.2.jinja": {"hf-stream": NEXT_OPENER},
    "llama.cpp/mistralai-Ministral-3-14B-Reasoning-2512.jinja": {"hf-stream": NEXT_OPENER},
    "llama.cpp/unsloth-mistral-Devstral-Small-2507.jinja": {"hf-stream": NEXT_OPENER},
    "extra/ArmGPT-ArmenianGPT-1.0-3B.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Devstral-2-123B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Devstral-Small-2-24B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Leanstral-1.5-119B-A6B.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Ministral-3-14B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Ministral-3-3B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Ministral-3-3B-Reasoning-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Ministral-3-8B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Mistral-Large-3-675B-Instruct-2512.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Mistral-Medium-3.5-128B.jinja": {"hf-stream": NEXT_OPENER},
    "extra/mistralai-Mistral-Small-4-119B-2603.jinja": {"hf-stream": NEXT_OPENER},
    "extra/deepseek-ai-deepseek-vl2-small.jinja": {"hf-stream": AFTER_STOP},
    "extra/microsoft-wavecoder-ultra-6.7b.jinja": {"hf-stream": AFTER_STOP},
    "extra/MiniMaxAI-MiniMax-VL-01.jinja": {"hf-stream": AFTER_STOP},
    "extra/NousResearch-Meta-Llama-3.1-8B-Instruct.jinja": {"hf-stream": AFTER_STOP},
    "extra/Salesforce-xgen-small-4B-base-r.jinja": {"hf-stream": AFTER_STOP},
    "extra/winninghealth-WiNGPT2-Llama-3-8B-Chat.jinja": {"hf-stream": AFTER_STOP},
    "extra/CohereLabs-c4ai-command-a-03-2025-axolotl.jinja": {"hf-stream": AFTER_STOP},
    "llama.cpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": {"hf-stream": AFTER_STOP},
    "llama.cpp/fireworks-ai-llama-3-firefunction-v2.jinja": {"hf-stream": AFTER_STOP},
    "extra/ibm-granite-granite-20b-functioncalling-vllm_tool_granite_20b_fc.jinja": {
        "hf": "parallel calls, each opened by its own '<function_call>' and closed by nothing: the json parser gets "
              "both objects as one region",
        "hf-stream": "the same as whole (hf)"},
    "extra/Kwaipilot-HiPO-8B.jinja": {
        "hf": "the generation prompt ends with a text of its own ('<judge>\\n') after the assistant header: the "
              "response template's start anchor is the header, so transformers reads that text as content",
        "hf-stream": "the same as whole (hf)"},
    "extra/BAAI-BGE-VL-Screenshot.jinja": {
        "hf": "the generation prompt ends with '<|endoftext|>' after the assistant header: the response template's "
              "start anchor is the header, so transformers reads that token as content",
        "hf-stream": "the same as whole (hf)"},
    "extra/dphn-Dolphin-Mistral-24B-Venice-Edition.jinja": {
        "hf-stream": "parallel calls with no closer of their own: streaming, the json parser gets the next call "
                     "with the arguments"},
    "extra/tiiuae-Falcon-H1-0.5B-Instruct.jinja": {"gbnf": ARGS_FIRST, "lark": ARGS_FIRST},
    "extra/tiiuae-Falcon-H1-7B-Instruct-axolotl.jinja": {"gbnf": ARGS_FIRST, "lark": ARGS_FIRST},
    "extra/tencent-Hy-Embodied-RxBrain-1.0.jinja": {
        "hf": "the template wraps content in <answer> only in turns without calls; the response template reads "
              "content only inside the wrapper, so content before calls is dropped",
        "hf-stream": "the same as whole (hf)"},
}


def test_exporters_verified_by_their_consumers(corpus_entry, analyzed, fixed_points) -> None:
    analysis = analyzed(corpus_entry.path)
    if isinstance(analysis, ChatAutoparserError):
        pytest.skip("no analysis (its error is checked by test_golden)")
    verdicts = verify_exports(load_template(corpus_entry.path), analysis, fixed_points(corpus_entry.path))
    failing = {fmt: v.reason for fmt, v in verdicts.items() if v.status == "failing"}
    known = KNOWN.get(corpus_entry.name, {})
    assert set(failing) <= set(known), f"{corpus_entry.name}: {failing}"
    assert set(known) <= set(failing), f"{corpus_entry.name}: {sorted(set(known) - set(failing))} pass now"
    for fmt, v in verdicts.items():
        assert v.status != "not_expressible" or v.reason, f"{fmt}: not expressible without a reason"


def test_known_entries_are_corpus_templates(corpus) -> None:
    assert set(KNOWN) <= {e.name for e in corpus}


def test_edgellm_matches_the_seed_example_for_qwen3(corpus_root) -> None:
    """seed 002's Qwen3 example (its default system prompt is the exporter's option: the
    template writes none, and the check against the Jinja output would refuse one)."""
    t = load_template(corpus_root / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja")
    from analyzer import analyze_template
    ct = edgellm.chat_template(t, analyze_template(t), model_path="/path/to/Qwen3-0.6B")
    turn = {"suffix": "<|im_end|>\n"}
    assert ct == {"model_path": "/path/to/Qwen3-0.6B", "content_types": {}, "default_system_prompt": "",
                  "roles": {r: {"prefix": f"<|im_start|>{r}\n", **turn} for r in ("system", "user", "assistant")},
                  "generation_prompt": "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                  "generation_prompt_thinking": "<|im_start|>assistant\n"}


def test_not_expressible_is_typed_with_the_evidence() -> None:
    from analyzer import from_string
    from analyzer import analyze_template
    t = from_string("{% for m in messages %}{% if loop.first %}FIRST {% endif %}<{{ m.role }}>{{ m.content }}"
                    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    with pytest.raises(NotExpressible) as e:
        edgellm.chat_template(t, analyze_template(t))
    assert isinstance(e.value, ChatAutoparserError) and e.value.fmt == "edgellm"
