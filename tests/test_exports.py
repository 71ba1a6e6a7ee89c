"""Every exporter over the corpus, checked by the tool that consumes its output
(:mod:`chat_autoparser.generator.verify.exports`): transformers' ``parse_response`` reads our HF response
template, llguidance compiles our structural tags (as vLLM's guidance backend does) and our
GBNF and Lark grammars, and the Edge-LLM JSON formats the standard conversations exactly as the
Jinja template does. A template a format cannot say is "not expressible" with the reason (counted
by ``benchmarks/export_counts.py``); failures are the exact list :data:`KNOWN`, each with the
reason and the wrong result it excuses.
"""

from __future__ import annotations

import pytest

from chat_autoparser.analyzer import load_template
from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.generator.export import NotExpressible, edgellm
from chat_autoparser.generator.verify.exports import verify_exports

NEXT_OPENER = ("calls with no closer of their own end where the next call opens (a lookahead); transformers' "
               "streaming does not end a region at a lookahead, so the next call runs into the arguments")
AFTER_STOP = ("the rendered output goes on after the turn's stop marker (the template's final suffix); transformers' "
              "streaming closes content at the stop marker before the longer closer can match and reads the rest "
              "as content (a server stops at the stop marker)")

ARGS_FIRST = ("the template's instructions put the arguments before the name: the grammar accepts only the "
              "first tool's arguments there (the name that would choose another tool's comes after them)")

def known(reason: str, *failures: str) -> dict[str, str]:
    """An excuse: each failing case of the format (a verdict's detail) must hold one of
    ``failures`` (a piece of the wrong result as the detail writes it), so a different failure on
    the same pair fails; each of them must still be seen."""
    return dict.fromkeys(failures, reason)


CONTENT_AT_HEADER = ("the response template opens content at the assistant header, which the prompt holds (the start "
                     "anchor is the prompt's end), so transformers reads no content (seen once the content turn was "
                     "spliced onto the prompt)")

KNOWN: dict[str, dict[str, dict[str, str]]] = {
    'llama.cpp/Reka-Edge.jinja': {
        'structural-tag': known("the template writes arguments with \\uXXXX escapes; llguidance's JSON strings refuse them", *['tricky_arguments (parallel=False): refused \' <tool_call>\\n{"name": "search_docs", "arguments": ']),
    },
    'extra/RekaAI-reka-edge-2603.jinja': {
        'structural-tag': known("the template writes arguments with \\uXXXX escapes; llguidance's JSON strings refuse them", *['tricky_arguments (parallel=False): refused \' <tool_call>\\n{"name": "search_docs", "arguments": ']),
    },
    'extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-vllm_tool_llama4_json.jinja': {
        'hf': known('parallel calls: the json parser gets an empty region (calls with no opener or closer of their own)',
                    'parallel_tool_calls: parse_response raised ValueError: json parser could not parse region')
        | known(CONTENT_AT_HEADER, "!= transformers {'content': None, 'reasoning_content': N"),
        'hf-stream': known('the same as whole (hf)',
                           'parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region')
        | known(CONTENT_AT_HEADER, "!= transformers {'content': None, 'reasoning_content': N"),
    },
    'extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-axolotl.jinja': {
        'hf': known('parallel calls: the json parser gets an empty region (calls with no opener or closer of their own)', *['parallel_tool_calls: parse_response raised ValueError: json parser could not parse region']),
        'hf-stream': known('the same as whole (hf)', *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/microsoft-Phi-4-mini-instruct-vllm_tool_phi4_mini.jinja': {
        'hf': known('parallel calls separated by a comma inside one section: the json parser reads two objects as one', *['parallel_tool_calls: parse_response raised ValueError: json parser could not parse region']),
        'hf-stream': known('the same as whole (hf)', *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/inclusionAI-SingGuard-2b.jinja': {
        'hf': known('content before a call is dropped by parse_response (the content region ends where the call opens)', *["!= transformers {'content': None, 'reasoning_content': N"]),
        'hf-stream': known('the same as whole (hf)', *["!= transformers {'content': None, 'reasoning_content': N"]),
    },
    'extra/meituan-longcat-LongCat-2.0.jinja': {
        'hf': known("the start anchor is not found in the prefix, so the prompt's text becomes content", *["!= transformers {'content': '<longcat_tool_declare>\\n# T", "!= transformers {'content': '<longcat_user>What is the w"]),
        'hf-stream': known('the same as whole (hf)', *["!= transformers {'content': '<longcat_tool_declare>\\n# T", "!= transformers {'content': '<longcat_user>What is the w"]),
    },
    'llama.cpp/Mistral-Small-3.2-24B-Instruct-2506.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'llama.cpp/meetkai-functionary-medium-v3.2.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'llama.cpp/mistralai-Ministral-3-14B-Reasoning-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'llama.cpp/unsloth-mistral-Devstral-Small-2507.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/ArmGPT-ArmenianGPT-1.0-3B.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Devstral-2-123B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Devstral-Small-2-24B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Leanstral-1.5-119B-A6B.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Ministral-3-14B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Ministral-3-3B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Ministral-3-3B-Reasoning-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Ministral-3-8B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Mistral-Large-3-675B-Instruct-2512.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Mistral-Medium-3.5-128B.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/mistralai-Mistral-Small-4-119B-2603.jinja': {
        'hf-stream': known(NEXT_OPENER, *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/deepseek-ai-deepseek-vl2-small.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.Response:'"]),
    },
    'extra/microsoft-wavecoder-ultra-6.7b.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.Response',"]),
    },
    'extra/MiniMaxAI-MiniMax-VL-01.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.<beginning"]),
    },
    'extra/NousResearch-Meta-Llama-3.1-8B-Instruct.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.assistant'"]),
    },
    'extra/Salesforce-xgen-small-4B-base-r.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.<|im_start"]),
    },
    'extra/winninghealth-WiNGPT2-Llama-3-8B-Chat.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.Assistant："]),
    },
    'extra/CohereLabs-c4ai-command-a-03-2025-axolotl.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.<|START_OF"]),
    },
    'llama.cpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': '<｜tool▁calls▁end｜><｜Assista"]),
    },
    'llama.cpp/fireworks-ai-llama-3-firefunction-v2.jinja': {
        'hf-stream': known(AFTER_STOP, *["!= transformers {'content': 'The answer is 42.assistant'", "!= transformers {'content': 'assistant', 'reasoning_cont"]),
    },
    'extra/ibm-granite-granite-20b-functioncalling-vllm_tool_granite_20b_fc.jinja': {
        'hf': known("parallel calls, each opened by its own '<function_call>' and closed by nothing: the json parser gets both objects as one region", *['parallel_tool_calls: parse_response raised ValueError: json parser could not parse region']),
        'hf-stream': known('the same as whole (hf)', *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/dphn-Dolphin-Mistral-24B-Venice-Edition.jinja': {
        'hf-stream': known('parallel calls with no closer of their own: streaming, the json parser gets the next call with the arguments', *['parallel_tool_calls: ResponseParser streaming raised ValueError: json parser could not parse region']),
    },
    'extra/tiiuae-Falcon-H1-0.5B-Instruct.jinja': {
        'gbnf': known(ARGS_FIRST, *['parallel_tool_calls: llguidance refuses the text at character 135', 'tricky_arguments: llguidance refuses the text at character 28']),
        'lark': known(ARGS_FIRST, *['parallel_tool_calls: llguidance refuses the text at character 135', 'tricky_arguments: llguidance refuses the text at character 28']),
    },
    'extra/tiiuae-Falcon-H1-7B-Instruct-axolotl.jinja': {
        'gbnf': known(ARGS_FIRST, *['parallel_tool_calls: llguidance refuses the text at character 135', 'tricky_arguments: llguidance refuses the text at character 28']),
        'lark': known(ARGS_FIRST, *['parallel_tool_calls: llguidance refuses the text at character 135', 'tricky_arguments: llguidance refuses the text at character 28']),
    },
    'extra/tencent-Hy-Embodied-RxBrain-1.0.jinja': {
        'hf': known('the template wraps content in <answer> only in turns without calls; the response template reads content only inside the wrapper, so content before calls is dropped', *["!= transformers {'content': None, 'reasoning_content': N"]),
        'hf-stream': known('the same as whole (hf)', *["!= transformers {'content': None, 'reasoning_content': N"]),
    },
}


def test_exporters_verified_by_their_consumers(corpus_entry, analyzed, fixed_points) -> None:
    analysis = analyzed(corpus_entry.path)
    if isinstance(analysis, ChatAutoparserError):
        pytest.skip("no analysis (its error is checked by test_golden)")
    verdicts = verify_exports(load_template(corpus_entry.path), analysis, fixed_points(corpus_entry.path))
    failing = {fmt: list(v.details or [v.reason]) for fmt, v in verdicts.items() if v.status == "failing"}
    known = KNOWN.get(corpus_entry.name, {})
    # a failing case its excuse does not name is new, and so is a failing format with no excuse
    new = {f"{fmt}: {d}" for fmt, details in failing.items() for d in details
           if not any(f in d for f in known.get(fmt, {}))}
    stale = sorted(f"{fmt}: {f!r}" for fmt, excuses in known.items() for f in excuses
                   if not any(f in d for d in failing.get(fmt, [])))
    assert not new, f"{corpus_entry.name}:\n" + "\n".join(sorted(new))
    assert not stale, f"{corpus_entry.name}: {stale} fail no more: take them off KNOWN"
    for fmt, v in verdicts.items():
        assert v.status != "not_expressible" or v.reason, f"{fmt}: not expressible without a reason"


def test_known_entries_are_corpus_templates(corpus) -> None:
    assert set(KNOWN) <= {e.name for e in corpus}


def test_edgellm_matches_the_seed_example_for_qwen3(corpus_root) -> None:
    """seed 002's Qwen3 example (its default system prompt is the exporter's option: the
    template writes none, and the check against the Jinja output would refuse one)."""
    t = load_template(corpus_root / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja")
    from chat_autoparser.analyzer import analyze_template
    ct = edgellm.chat_template(t, analyze_template(t), model_path="/path/to/Qwen3-0.6B")
    turn = {"suffix": "<|im_end|>\n"}
    assert ct == {"model_path": "/path/to/Qwen3-0.6B", "content_types": {}, "default_system_prompt": "",
                  "roles": {r: {"prefix": f"<|im_start|>{r}\n", **turn} for r in ("system", "user", "assistant")},
                  "generation_prompt": "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                  "generation_prompt_thinking": "<|im_start|>assistant\n"}


def test_not_expressible_is_typed_with_the_evidence() -> None:
    from chat_autoparser.analyzer import from_string
    from chat_autoparser.analyzer import analyze_template
    t = from_string("{% for m in messages %}{% if loop.first %}FIRST {% endif %}<{{ m.role }}>{{ m.content }}"
                    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    with pytest.raises(NotExpressible) as e:
        edgellm.chat_template(t, analyze_template(t))
    assert isinstance(e.value, ChatAutoparserError) and e.value.fmt == "edgellm"


def _edgellm_case(source: str):
    from chat_autoparser.analyzer import analyze_template, from_string
    t = from_string(source)
    return t, analyze_template(t)


CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_edgellm_refuses_an_empty_default_system_block() -> None:
    """Edge-LLM adds no system message for an empty default: a template that writes an empty
    system block when the request has none cannot be flattened, and says why."""
    t, a = _edgellm_case("{% if messages[0].role != 'system' %}<|im_start|>system\n<|im_end|>\n{% endif %}" + CHATML)
    with pytest.raises(NotExpressible, match="empty system block"):
        edgellm.chat_template(t, a)


def test_edgellm_explains_a_message_rewritten_once_others_follow() -> None:
    """A template that writes an instruction into the last user message only: the flattened
    conversation differs, and the template's own renders show why (not expressible)."""
    from chat_autoparser.generator.verify.exports import verify_edgellm
    t, a = _edgellm_case("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if loop.last and m.role == 'user' %}"
                         "Think first.\n{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}"
                         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    v = verify_edgellm(t, a)
    assert v.status == "not_expressible" and "once more messages follow them" in v.reason


def test_edgellm_mismatch_no_render_explains_fails(monkeypatch) -> None:
    """A flattened conversation that differs although the template writes every message the
    same wherever it stands is our export's fault: failing, not "not expressible"."""
    from chat_autoparser.generator.verify.exports import verify_edgellm
    t, a = _edgellm_case(CHATML)
    assert verify_edgellm(t, a).status == "verified"
    wrong = {"conversation": "multi_turn", "enable_thinking": False, "jinja": "x", "flattened": "y"}
    monkeypatch.setattr(edgellm, "check", lambda *args, **kw: [wrong])
    v = verify_edgellm(t, a)
    assert v.status == "failing" and "differs" in v.reason


def test_hf_start_anchor_takes_the_generation_prompts_own_text() -> None:
    """Text every setting's generation prompt writes after the assistant header (not a reasoning
    marker, nor the start of one) is the prompt's: the response template's anchor ends after it."""
    import dataclasses
    from chat_autoparser.analyzer import analyze_template
    from chat_autoparser.generator.export.hf import response_template
    a = analyze_template("templates/chatml-think.jinja")
    assert response_template(a)["start_anchor"] == a.assistant_start
    judged = dataclasses.replace(a, generation_prompt=a.assistant_start + "<judge>\n",
                                 generation_prompt_thinking=a.assistant_start + "<judge>\n", thinking_settings=())
    assert response_template(judged)["start_anchor"] == a.assistant_start + "<judge>\n"
    opened = dataclasses.replace(judged, generation_prompt_thinking=a.assistant_start + "<think>\n")
    assert response_template(opened)["start_anchor"] == a.assistant_start


def test_every_export_is_in_one_table_and_checked() -> None:
    """An export is one module and one entry of generator.export.EXPORTERS; the command line
    offers every entry, and the verifier checks every one (a new export without its check fails
    here)."""
    import importlib

    from chat_autoparser.generator.export import EXPORTERS, FORMATS, JSON_FORMATS
    from chat_autoparser.generator.verify.exports import VERIFIERS
    from chat_autoparser.tools.debug_template_parser import _parser

    assert set(EXPORTERS) <= set(VERIFIERS) and FORMATS == tuple(EXPORTERS)
    assert JSON_FORMATS == {name for name, e in EXPORTERS.items() if e.json}
    for e in EXPORTERS.values():
        assert callable(getattr(importlib.import_module(f"chat_autoparser.generator.export.{e.module}"), e.function))
        assert e.options in ("", "request", "chat_template_kwargs")
    choices = next(a.choices for a in _parser()._actions if a.dest == "export")
    assert tuple(choices) == FORMATS
