"""The vLLM plugin (``chat_autoparser.integrations.vllm``) driven by the real vLLM: vLLM's
``ParserManager.get_parser("autoparser", "autoparser")`` composes our tool and reasoning parsers
into its own ``DelegatingParser``, and vLLM's own chat-completion serving code
(``OpenAIServingChat.chat_completion_full_generator`` and ``chat_completion_stream_generator``,
with its ``ChatStreamProcessor``) turns replayed engine outputs into the response and its SSE
chunks (``integrations.vllm_replay.serve``); the hand-written cases also call ``parse`` /
``parse_delta`` directly (``replay``). Over the corpus, every template's own rendered outputs
(the fixed point's scenarios: content, reasoning, one call, parallel calls, tricky and empty
arguments) must give through vLLM the message the fixed point verified, with its finish reason.

vLLM 0.33 pins transformers<5.21 and a CUDA torch, so these tests run in a venv of their own
(``pip install '.[vllm]'``; ``.ci/run`` builds it); without vLLM they are skipped, saying so.
Tokens: a character-level stand-in tokenizer (``integrations.vllm_replay.CharTokenizer``: one id per
character, deltas of 3 ids) carrying the template and its special tokens: vLLM's serving code
only decodes ids and passes text to our parsers, and the fixed point's outputs are text.
"""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed: pip install '.[vllm]' (a venv of its own)")

from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager  # noqa: E402

from chat_autoparser.integrations import vllm as plugin  # noqa: E402
from chat_autoparser.integrations.vllm_replay import CharTokenizer, parser_class, replay, serve  # noqa: E402
from chat_autoparser.integrations.vllm_replay import request as _request  # noqa: E402


def _ours(parsed: dict[str, Any]) -> dict[str, Any]:
    calls = parsed.get("tool_calls") or []
    return {"reasoning": parsed.get("reasoning_content") or None, "content": parsed.get("content") or None,
            "calls": [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]}


def _strip_ids(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "ids"}


def _plain(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in ("ids", "finish_reason")}


# ----------------------------------------------------------------------------- registration

def test_registered_under_one_name():
    assert ToolParserManager.get_tool_parser("autoparser") is plugin.AutoparserToolParser
    assert ReasoningParserManager.get_reasoning_parser("autoparser") is plugin.AutoparserReasoningParser


def test_entry_point_declared():
    from importlib.metadata import entry_points
    found = [e for e in entry_points(group="vllm.general_plugins") if e.name == "autoparser"]
    assert found and found[0].value == "chat_autoparser.integrations.vllm:register"


def test_examples_in_the_plugin():
    result = doctest.testmod(plugin)
    assert result.attempted and not result.failed


# ----------------------------------------------------------------------------- one template, by hand

THINK = "templates/chatml-think.jinja"
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_reasoning_content_and_call(tmp_path):
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(THINK)
    tok = CharTokenizer(ct.template.source, {"bos_token": "<s>", "eos_token": "</s>"})
    request = _request(WEATHER)
    prompt = ct.render([{"role": "user", "content": "hi"}], tools=WEATHER)
    output = ('<think>\nLet me check.\n</think>\n\nSure.<tool_call>\n{"name": "get_weather", "arguments": '
              '{"city": "Paris"}}\n</tool_call>')
    shot, stream = replay(tok, prompt, output, request)
    expected = _ours(ct.parser(tools=WEATHER, prompt=prompt).parser.parse(output))
    assert _strip_ids(shot) == _strip_ids(stream) == expected
    assert shot["ids"] == stream["ids"] and all(shot["ids"])


def test_chat_template_kwargs_reach_the_parser(corpus_root):
    """DeepSeek-V3.1's ``thinking`` kwarg opens the reasoning in the prompt: the request's kwargs
    decide, as vLLM passes them to the reasoning parser."""
    path = corpus_root / "extra/tencent-DeepSeek-V3.1-Terminus-W4AFP8.jinja"
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(path)
    tok = CharTokenizer(ct.template.source, ct.template.special_tokens)
    output = "plan</think>Answer"
    on = _request(None, {"thinking": True})
    prompt = ct.render([{"role": "user", "content": "hi"}], chat_template_kwargs={"thinking": True})
    shot, stream = replay(tok, prompt, output, on)
    assert shot["reasoning"] == stream["reasoning"] == "plan"
    assert shot["content"] == stream["content"] == "Answer"


def test_required_tool_choice_puts_our_grammar():
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(THINK)
    tok = CharTokenizer(ct.template.source, {"bos_token": "<s>", "eos_token": "</s>"})
    request = _request(WEATHER, tool_choice="required")
    parser = parser_class()(tok, request.tools, chat_template_kwargs=None, model_config=None)
    adjusted = parser.adjust_request(request)
    grammar = adjusted.structured_outputs.grammar
    assert "get_weather" in grammar and "<tool_call>" in grammar
    # vLLM's own check of that field, as its guidance backend runs it
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
    validate_guidance_grammar(adjusted.to_sampling_params(1000, {}))


# ----------------------------------------------------------------------------- the corpus

def test_corpus_outputs_through_vllm(corpus_entry, fixed_points):
    """Every scenario whose fixed point holds: vLLM's one-shot and streamed messages equal ours."""
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
    points = fixed_points(corpus_entry.path)
    held = {name: fp for name, fp in points.items() if fp.ok and not fp.skipped}
    if not held:
        pytest.skip("no scenario of this template holds its fixed point (reported by template-report)")
    loaded = load_template(corpus_entry.path)
    tok = CharTokenizer(loaded.source, loaded.special_tokens)
    plugin._TEMPLATES.clear()
    wrong = []
    for name, fp in held.items():
        tools = list(RT_TOOLS) if fp.with_tools else None
        request = _request(tools)
        full, stream = serve(tok, fp.prompt, fp.generated, request)
        expected = _ours(fp.parsed)  # the message the fixed point verified (it renders the output back)
        reason = "tool_calls" if expected["calls"] else "stop"
        if _plain(full) != expected or _plain(stream) != expected:
            wrong.append(f"{name}: ours {expected}, vLLM response {_plain(full)}, streamed {_plain(stream)}")
        elif full["finish_reason"] != reason or stream["finish_reason"] != reason:
            wrong.append(f"{name}: finish_reason {full['finish_reason']}, streamed {stream['finish_reason']}")
        elif len(set(stream["ids"])) != len(stream["ids"]) or not all(stream["ids"]) or full["ids"] != stream["ids"]:
            wrong.append(f"{name}: call ids {full['ids']}, streamed {stream['ids']}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name,output", [
    ("extra/mistralai-Mistral-7B-Instruct-v0.3.jinja", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("llama.cpp/Mistral-Small-3.2-24B-Instruct-2506.jinja", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'),
    ("templates/chatml-think.jinja", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
])
def test_five_turn_conversation_through_the_plugin(corpus_root, name, output):
    """Each turn: the prompt of the conversation so far, the model's call (it writes no id),
    vLLM's message appended with the call's result; every next turn renders (templates that
    check ids included) and no id repeats."""
    from chat_autoparser import ChatTemplate
    from pathlib import Path
    path = Path(name) if name.startswith("templates/") else corpus_root / name
    ct = ChatTemplate.from_pretrained(path)
    tok = CharTokenizer(ct.template.source, ct.template.special_tokens)
    conv: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    api = list(conv)  # the request's messages: arguments as JSON text, as the OpenAI API sends them
    ids = []
    for _ in range(5):
        prompt = ct.render(conv, WEATHER)
        shot, stream = replay(tok, prompt, output, _request(WEATHER, messages=api))
        assert shot["ids"] == stream["ids"] and len(shot["calls"]) == 1
        cid = shot["ids"][0]
        ids.append(cid)
        for args in ({"city": "Paris"}, '{"city": "Paris"}'):
            (conv if isinstance(args, dict) else api).extend([
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
                {"role": "tool", "tool_call_id": cid, "name": "get_weather", "content": "sunny"}])
    ct.render(conv, WEATHER)
    assert len(set(ids)) == 5


def test_tool_choice_none_and_named():
    """``none``: the call's text stays content, no call; a named tool: its calls are read."""
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(THINK)
    tok = CharTokenizer(ct.template.source, {"bos_token": "<s>", "eos_token": "</s>"})
    search = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {}}}}
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    prompt = ct.render([{"role": "user", "content": "hi"}], tools=WEATHER)
    shot, stream = replay(tok, prompt, call, _request(WEATHER, tool_choice="none"))
    assert shot["calls"] == stream["calls"] == [] and "get_weather" in shot["content"] and "get_weather" in stream["content"]
    named = {"type": "function", "function": {"name": "get_weather"}}
    shot, stream = replay(tok, prompt, call, _request(WEATHER + [search], tool_choice=named))
    assert shot["calls"] == stream["calls"] == [("get_weather", {"city": "Paris"})]


def test_corpus_required_tool_choice_grammar(corpus_entry, fixed_points):
    """``tool_choice="required"``: vLLM's composition of our parsers puts our grammar for the
    request into ``structured_outputs``, and vLLM's own check of that field (its guidance
    backend's) accepts it, on every template whose call the fixed point holds."""
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
    fp = fixed_points(corpus_entry.path).get("tool_call")
    if fp is None or not fp.ok or fp.skipped:
        pytest.skip("no held tool-call fixed point (template-report says why)")
    loaded = load_template(corpus_entry.path)
    tok = CharTokenizer(loaded.source, loaded.special_tokens)
    plugin._TEMPLATES.clear()
    request = _request(list(RT_TOOLS), tool_choice="required")
    parser = parser_class()(tok, request.tools, chat_template_kwargs=None, model_config=None)
    adjusted = parser.adjust_request(request)
    assert adjusted.structured_outputs is not None and adjusted.structured_outputs.grammar
    validate_guidance_grammar(adjusted.to_sampling_params(1000, {}))


def test_kwargs_and_prompt_together_through_vllm(corpus_root):
    """Hermes-4's ``thinking`` changes only its instructions, not its generation prompt: with the
    prompt vLLM hands over, the request's kwargs still decide (reasoning read)."""
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(corpus_root / "extra/NousResearch-Hermes-4-14B.jinja")
    tok = CharTokenizer(ct.template.source, ct.template.special_tokens)
    prompt = ct.render([{"role": "user", "content": "hi"}], chat_template_kwargs={"thinking": True})
    full, stream = serve(tok, prompt, "<think>plan</think>Answer", _request(None, {"thinking": True}))
    assert (full["reasoning"], full["content"]) == (stream["reasoning"], stream["content"]) == ("plan", "Answer")


def test_special_tokens_kept_in_the_text():
    from chat_autoparser import ChatTemplate
    ct = ChatTemplate.from_pretrained(THINK)
    tok = CharTokenizer(ct.template.source, {"bos_token": "<s>", "eos_token": "</s>"})
    request = _request(WEATHER)
    assert request.skip_special_tokens is not False  # (vLLM's default: skipped)
    parser = parser_class()(tok, request.tools, chat_template_kwargs=None, model_config=None)
    assert parser.adjust_request(request).skip_special_tokens is False


def test_tool_parser_alone_keeps_reasoning_as_content():
    """``--tool-call-parser autoparser`` with no reasoning parser: the block stays content, with
    its markers, one-shot and streamed (vLLM's own behaviour without a reasoning parser)."""
    from chat_autoparser import ChatTemplate
    from vllm.parser.parser_manager import ParserManager
    ct = ChatTemplate.from_pretrained(THINK)
    tok = CharTokenizer(ct.template.source, {"bos_token": "<s>", "eos_token": "</s>"})
    cls = ParserManager.get_parser(tool_parser_name="autoparser", reasoning_parser_name=None, enable_auto_tools=True)
    request = _request(WEATHER)
    output = '<think>plan</think>Hi<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    reasoning, content, calls = cls(tok, request.tools, model_config=None).parse(output, request, enable_auto_tools=True)
    assert reasoning is None and content == "<think>plan</think>Hi" and [c.name for c in calls] == ["get_weather"]
    streamed = cls(tok, request.tools, model_config=None)
    prompt_ids = tok.encode(ct.render([{"role": "user", "content": "hi"}], tools=WEATHER))
    text = ""
    for i in range(0, len(output), 3):
        d = streamed.parse_delta(output[i:i + 3], tok.encode(output[i:i + 3]), request, prompt_ids,
                                 finished=i + 3 >= len(output))
        if d is not None:
            assert not d.reasoning
            text += d.content or ""
    assert text == "<think>plan</think>Hi"


def test_named_templates_of_the_tokenizer():
    """A tokenizer with named templates: the analysis reads the calls of ``tool_use``, the one vLLM
    renders when the request has tools."""
    plugin._TEMPLATES.clear()
    default = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    tool_use = (default.replace("{% for m", "{% for t in tools %}{{ t | tojson }}{% endfor %}{% for m")
                .replace("{{ m.content }}", "{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function | tojson }}</call>"
                         "{% endfor %}{% else %}{{ m.content }}{% endif %}"))
    tok = CharTokenizer("", {"bos_token": "<s>", "eos_token": "</s>"})
    tok.chat_template = {"default": default, "tool_use": tool_use}
    ct = plugin.template_for(tok)
    assert set(ct.template.variants) == {"default", "tool_use"}
    assert ct.analysis.tool_call_structure.call_parts
