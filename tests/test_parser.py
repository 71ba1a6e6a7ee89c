"""The parser on what models actually write (issue cases, each on the corpus template named):
state from the real prompt, the template's default thinking setting, lenient reading of
generic deviations, precision (prose is never a call), truncation (nothing lost). Fast: each
test builds one or two parsers."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from chat_autoparser.analyzer import analyze_template
from chat_autoparser.errors import ParseError
from corpus_fixtures import session_corpus
from chat_autoparser.generator import generate_parser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
             "query": {"type": "string"}}}}}]


@lru_cache(maxsize=None)
def analysis(name: str):
    return analyze_template(Path(session_corpus()) / name)


def parse(name: str, text: str, **kwargs) -> dict:
    kwargs.setdefault("tools", TOOLS)
    parser = generate_parser(analysis(name), **kwargs).parser
    message = parser.parse(text)
    stream = parser.stream()
    for i in range(0, len(text), 3):
        stream.feed(text[i:i + 3])
    assert stream.finish()[0] == message, "streaming differs from one-shot"
    return message


def calls(message: dict) -> list[tuple[str, object]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []]


QWEN_THINKING = "extra/Qwen-Qwen3-4B-Thinking-2507.jinja"
DEEPSEEK_V31 = "llama.cpp/deepseek-ai-DeepSeek-V3.1.jinja"
LLAMA32 = "llama.cpp/meta-llama-Llama-3.2-3B-Instruct.jinja"
QWEN25 = "llama.cpp/Qwen-Qwen2.5-7B-Instruct.jinja"


# --------------------------------------------------------------------------- start state

def test_reasoning_start_written_again_after_the_prompt_opened_it():
    m = parse(QWEN_THINKING, "<think>\nhmm\n</think>\n\nHi")
    assert (m["reasoning_content"], m["content"]) == ("hmm", "Hi")


def test_the_templates_default_setting_when_no_kwargs_are_passed():
    # DeepSeek V3.1 closes reasoning in its prompt unless thinking is asked for
    assert parse(DEEPSEEK_V31, "Hello there")["content"] == "Hello there"
    assert parse(DEEPSEEK_V31, "Hello there", enable_thinking=True)["reasoning_content"] == "Hello there"
    params = generate_parser(analysis(DEEPSEEK_V31))
    assert params.start["source"] == "setting:default" and params.chat_template_kwargs == {}


@pytest.mark.parametrize("prompt, text, reasoning, content", [
    ("<｜Assistant｜><think>", "hmm</think>Hi", "hmm", "Hi"),                # reasoning opened
    ("<｜Assistant｜><think></think>", "Hi", None, "Hi"),                    # closed
    ("<｜Assistant｜><thi", "nk>hmm</think>Hi", "hmm", "Hi"),                 # a marker cut in the middle
])
def test_state_from_the_real_prompt(prompt, text, reasoning, content):
    m = parse(DEEPSEEK_V31, text, prompt=prompt)
    assert (m["reasoning_content"], m["content"]) == (reasoning, content)


def test_a_cut_marker_the_output_does_not_complete_is_not_output():
    m = parse(DEEPSEEK_V31, "ought about it", prompt="<｜Assistant｜><thi")
    assert m["content"] == "ought about it"


# --------------------------------------------------------------------------- reasoning

def test_a_call_after_reasoning_that_was_never_closed():
    text = 'hmm\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    m = parse(QWEN_THINKING, text)
    assert m["reasoning_content"] == "hmm" and calls(m) == [("get_weather", {"city": "Paris"})]
    assert m["parse_warnings"] == ["reasoning was not closed before a tool call"]
    off = parse(QWEN_THINKING, text, calls_in_reasoning=False)
    assert "tool_calls" not in off and "<tool_call>" in off["reasoning_content"]


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
DRAFTS = [
    ("I will call\n" + CALL + "\nthen answer.", "planned"),
    ("The format is:\n```\n" + CALL.replace("Paris", "...") + "\n```\nok.", "fenced"),
    ("First\n" + CALL + "\nand again\n" + CALL.replace("Paris", "Rome") + "\ndone.", "two drafts"),
]


@pytest.mark.parametrize("reasoning, _", DRAFTS, ids=[d[1] for d in DRAFTS])
def test_a_call_drafted_in_reasoning_that_closes_stays_reasoning(reasoning, _):
    """Issue 29, item 0: the reasoning closes after the draft, so the draft is not a call (one
    call, the real one; the reasoning whole; no warning). Streamed at every split point alike."""
    text = reasoning + "\n</think>\n\n" + CALL
    m = parse(QWEN_THINKING, text)
    assert m["reasoning_content"] == reasoning and calls(m) == [("get_weather", {"city": "Paris"})]
    assert "parse_warnings" not in m and m["content"] is None
    parser = generate_parser(analysis(QWEN_THINKING), tools=TOOLS).parser
    for cut in range(1, len(text)):
        stream = parser.stream()
        stream.feed(text[:cut])
        stream.feed(text[cut:])
        assert stream.finish()[0] == m, cut
    # a draft and nothing after the close: still not a call
    m = parse(QWEN_THINKING, reasoning + "\n</think>\n\nDone.")
    assert "tool_calls" not in m and m["reasoning_content"] == reasoning and m["content"] == "Done."


QUOTE = CALL.replace("Paris", "...")


@pytest.mark.parametrize("reasoning, real", [
    ("Format:\n```\n" + QUOTE + "\n```\nok.", CALL),
    # a fence is closed by a run at least as long: a shorter one inside is text
    ("Format:\n````\n" + QUOTE + "\n```\n" + QUOTE + "\n`````\nok.", CALL),
    # outside the fence, a call in unclosed reasoning ends it
    ("Format:\n```\n" + QUOTE + "\n```", CALL + "\n```\nok."),
], ids=["fence", "longer fence", "after the fence"])
def test_a_call_quoted_in_a_fence_in_reasoning_that_never_closes_stays_reasoning(reasoning, real):
    """Reasoning never closed: the real call ends it, a quoted one (in a fenced block) is
    reasoning."""
    m = parse(QWEN_THINKING, reasoning + "\n" + real)
    assert m["reasoning_content"] == reasoning and calls(m)[0] == ("get_weather", {"city": "Paris"})
    assert m["parse_warnings"][0] == "reasoning was not closed before a tool call"


@pytest.mark.parametrize("reasoning", [
    "I should wrap code in ``` fences.",  # backticks inside a line open no block
    "x\n```\ncode\n```python\ny\n```",  # a run with an info string closes no block
    "x\n````\ncode\n```\n````",  # a shorter run closes no block
], ids=["inline", "info string", "shorter"])
def test_only_fences_that_open_and_close_blocks_hide_calls(reasoning):
    """A call after backticks that leave no code block open ends reasoning that never closes."""
    m = parse(QWEN_THINKING, reasoning + "\n" + CALL)
    assert m["reasoning_content"] == reasoning and calls(m) == [("get_weather", {"city": "Paris"})]


def test_a_reasoning_end_inside_a_drafted_call_closes_the_reasoning():
    """The draft's value runs into the reasoning's end marker (its closer is missing): the
    reasoning closes there, so the draft is reasoning and only the real call is a call."""
    draft = "Plan:\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\nhmm"
    real = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    m = parse("llama.cpp/GLM-4.6.jinja", "\n<think>" + draft + "</think>\n" + real)
    assert m["reasoning_content"] == draft and calls(m) == [("get_weather", {"city": "Paris"})]


def test_code_blocks_in_reasoning_stream_as_one_region():
    """Fences in reasoning are text of the one reasoning region: one open, one close."""
    parser = generate_parser(analysis(QWEN_THINKING), tools=TOOLS).parser
    text = "hmm\n" + "Code:\n```python\nprint(1)\n```\n" * 50 + "</think>ok"
    stream = parser.stream()
    events = [e for i in range(0, len(text), 7) for e in stream.feed(text[i:i + 7])]
    opens = [e for e in events if e["type"] == "region_open" and e["field"] == "reasoning_content"]
    assert len(opens) == 1 and stream.finish()[0] == parser.parse(text)


def test_streaming_holds_a_drafted_call_until_the_reasoning_closes():
    """The reasoning before the draft streams; from the draft's opener nothing is handed out
    until the reasoning's end marker (or the end of the output) decides."""
    parser = generate_parser(analysis(QWEN_THINKING), tools=TOOLS).parser
    stream = parser.stream()
    seen = [e for part in ("I will call\n", CALL, "\nthen answer.") for e in stream.feed(part)]
    assert [e["text"] for e in seen if e["type"] == "region_chunk"] == ["I will call"]
    after = stream.feed("\n</think>\n\n")
    assert "".join(e.get("text", "") for e in after if e["type"] == "region_chunk") == \
        "\n" + CALL + "\nthen answer."


def test_marker_text_in_reasoning_that_is_not_a_call_stays_reasoning():
    m = parse(QWEN_THINKING, "I could write <tool_call> here.\n</think>\n\nHi")
    assert m["reasoning_content"] == "I could write <tool_call> here." and "tool_calls" not in m


# --------------------------------------------------------------------------- calls

@pytest.mark.parametrize("name, text", [
    ("llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja",
     '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", '[TOOL_CALLS]{"name": "get_weather", "arguments": '
                                                             '{"city": "Paris"}}'),
    ("llama.cpp/NVIDIA-Nemotron-Nano-v2.jinja",
     '</think><TOOLCALL>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]</TOOLCALL>'),
    ("llama.cpp/unsloth-Apriel-1.5.jinja", '<tool_calls>\n{"name": "get_weather", "parameters": {"city": "Paris"}}'
                                           '</tool_calls>'),
    ("llama.cpp/Qwen3.5-4B.jinja", '<tool_call>\n  <function=get_weather>\n  <parameter=city>\nParis\n'
                                   '  </parameter>\n  </function>\n</tool_call>'),
    ("llama.cpp/Qwen3.5-4B.jinja", '<function=get_weather>\n<parameter=city>\nParis\n</function>'),
    ("llama.cpp/Kimi-K2-Instruct.jinja", '<|tool_calls_section_begin|><|tool_call_begin|>get_weather:0'
                                         '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_calls_section_end|>'),
])
def test_generic_deviations_give_the_call(name, text):
    assert calls(parse(name, text)) == [("get_weather", {"city": "Paris"})]


def test_a_call_without_its_opener_takes_the_openers_closer_if_written():
    m = parse("llama.cpp/Qwen3.5-4B.jinja", "</think>\n\n<function=get_weather>\n<parameter=city>\nParis\n"
                                            "</parameter>\n</function>\n</tool_call>\nDone.")
    assert calls(m) == [("get_weather", {"city": "Paris"})] and m["content"] == "Done." and "parse_error" not in m


def test_two_calls_in_one_deepseek_section_and_in_two_sections():
    call = "<｜tool▁call▁begin｜>{}<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    one = call.format("get_weather", '{"city": "Paris"}') + call.format("search", '{"query": "x"}')
    both = [("get_weather", {"city": "Paris"}), ("search", {"query": "x"})]
    assert calls(parse(DEEPSEEK_V31, "<｜tool▁calls▁begin｜>" + one + "<｜tool▁calls▁end｜>")) == both
    two = "".join(f"<｜tool▁calls▁begin｜>{c}<｜tool▁calls▁end｜>" for c in
                  (call.format("get_weather", '{"city": "Paris"}'), call.format("search", '{"query": "x"}')))
    assert calls(parse(DEEPSEEK_V31, two)) == both


@pytest.mark.parametrize("text", [
    "[get_weather(city='Paris', days=3, tags=['a', 'b']), search(query=\"x, y\")]",
    "[get_weather(city=\"Paris\", days=3, tags=[\"a\", \"b\"]), search(query='''x, y''')]",
])
def test_pythonic_calls_with_python_quoting(text):
    m = parse("extra/baseten-Llama-3.2-3B-Instruct-pythonic.jinja", text)
    assert calls(m) == [("get_weather", {"city": "Paris", "days": 3, "tags": ["a", "b"]}), ("search", {"query": "x, y"})]


LLAMA4_PYTHONIC = "extra/meta-llama-Llama-4-Scout-17B-16E-Instruct-vllm_tool_llama4_pythonic.jinja"


@pytest.mark.parametrize("text", [
    "[get_weather(city='Paris', days=3), search(query=\"x, y\")]",
    "[get_weather(city='Paris', days=\"3\"), search(query='''x, y''')]",
])
def test_python_values_where_the_template_quotes_values_itself(text):
    """The template writes ``key="value"`` (its own quotes around any value): other quotes or
    none are a Python literal, read as such and reported as a deviation."""
    m = parse(LLAMA4_PYTHONIC, text)
    assert calls(m) == [("get_weather", {"city": "Paris", "days": 3}), ("search", {"query": "x, y"})]
    canonical = '[get_weather(city="Paris", days="3"), search(query="x, y")]'
    assert parse(LLAMA4_PYTHONIC, canonical) == m
    with pytest.raises(ParseError):
        generate_parser(analysis(LLAMA4_PYTHONIC), tools=TOOLS).parser.parse(text, strict=True)


@pytest.mark.parametrize("schema", [{"type": "object"}, None])
def test_python_keys_in_a_value_the_template_writes_as_json(schema):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, **({"opts": schema} if schema else {})}}}}]
    m = parse("llama.cpp/LFM2.5-8B-A1B.jinja",
              "<|tool_call_start|>[get_weather(city='Paris', opts={'a': [1, None], \"b\": True})]<|tool_call_end|>",
              tools=tools)
    assert calls(m) == [("get_weather", {"city": "Paris", "opts": {"a": [1, None], "b": True}})]


LLAMA31 = "llama.cpp/meta-llama-Llama-3.1-8B-Instruct.jinja"


def test_a_call_opened_by_a_marker_the_template_writes_in_another_branch():
    """Llama 3.1 writes <|python_tag|> (and <|eom_id|>) only for built-in tools; models write it
    before ordinary calls too. A call must follow: the marker alone stays text."""
    assert analysis(LLAMA31).tool_call_structure.alt_openers == ("<|python_tag|>", "<|eom_id|>")
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    for text in (f"<|python_tag|>{call}", f"<|python_tag|>{call}<|eom_id|>", f"{call}<|eom_id|>"):
        m = parse(LLAMA31, text)
        assert calls(m) == [("get_weather", {"city": "Paris"})] and not m["content"], text
    assert parse(LLAMA31, "Use <|python_tag|> for tools.")["content"] == "Use <|python_tag|> for tools."
    text = '<|python_tag|>{"name": "unknown", "parameters": {}}'
    assert parse(LLAMA31, text)["content"] == text
    params = generate_parser(analysis(LLAMA31), tools=TOOLS)
    from chat_autoparser.generator.triggers import trigger_start
    assert trigger_start(f"Sure. <|python_tag|>{call}", params.grammar_triggers) == len("Sure. <|python_tag|>")


PHI4_MINI = "extra/microsoft-Phi-4-mini-instruct-vllm_tool_phi4_mini.jinja"


def test_a_prefix_the_instructions_glue_to_their_example_call_opens_calls():
    """History renders bare JSON calls; the instructions ask for ``functools[{"name": ...}, ...]``."""
    assert analysis(PHI4_MINI).tool_call_structure.alt_openers == ("functools",)
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    for text in (f"functools[{call}]", f"functools[{call}, {call.replace('get_weather', 'search')}]", call):
        m = parse(PHI4_MINI, text)
        assert calls(m)[0] == ("get_weather", {"city": "Paris"}) and not m["content"], text
    assert parse(PHI4_MINI, "Import functools[0] first.")["content"] == "Import functools[0] first."
    params = generate_parser(analysis(PHI4_MINI), tools=TOOLS)
    from chat_autoparser.generator.triggers import trigger_start
    assert trigger_start(f"Sure. functools[{call}]", params.grammar_triggers) == len("Sure. functools[")


@pytest.mark.parametrize("name, text", [
    (PHI4_MINI, '{"name": "get_weather", "arguments": {\'city\': "O\'Hare", \'tags\': [\'a\', None]}}'),
    (PHI4_MINI, 'functools[{"name": "get_weather", "arguments": {\'city\': "O\'Hare", \'tags\': [\'a\', None]}}]'),
    ("extra/ServiceNow-AI-Apriel-1.6-15b-Thinker.jinja",  # (prints arguments with |string: a dict's repr)
     'ok\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "get_weather", "arguments": '
     '{\'city\': "O\'Hare", \'tags\': [\'a\', None]}}]</tool_calls>'),
])
def test_json_call_arguments_written_as_a_python_dict(name, text):
    m = parse(name, text)
    assert calls(m) == [("get_weather", {"city": "O'Hare", "tags": ["a", None]})] and not m.get("parse_error")
    with pytest.raises(ParseError):
        generate_parser(analysis(name), tools=TOOLS).parser.parse(text, strict=True)


@pytest.mark.parametrize("name, text", [
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {\'city\': 1e999}}\n</tool_call>'),
    (LLAMA4_PYTHONIC, "[get_weather(city='Paris', days=1e999)]"),
])
def test_a_number_json_cannot_write_is_never_written(name, text):
    m = parse(name, text)
    assert "Infinity" not in json.dumps(m) and "1e999" in json.dumps(m)


@pytest.mark.parametrize("text", ["[get_weather(city=)]", "[get_weather(city=, days=3)]"])
def test_a_missing_value_takes_nothing_that_follows(text):
    m = parse(LLAMA4_PYTHONIC, text)
    assert m["parse_error"] and ")" not in "".join(c["function"]["arguments"] for c in m.get("tool_calls") or [])


def test_json_call_arguments_cut_inside_a_python_dict_are_kept():
    m = parse(QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {\'city\': \'Par')
    assert m["tool_calls"][0]["function"]["arguments"] == "{'city': 'Par" and m["parse_error"]


R7B = "llama.cpp/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"


@pytest.mark.parametrize("enable_thinking", [None, True])
def test_a_reasoning_opener_the_prompt_and_the_turn_share(enable_thinking):
    """Thinking off, the prompt ends with the empty pair (<|START_THINKING|><|END_THINKING|>);
    on, with neither: the turn's opener is the pair's, and a model that thinks anyway is read."""
    assert analysis(R7B).content_structure.reasoning_start == "<|START_THINKING|>"
    m = parse(R7B, "<|START_THINKING|>hmm<|END_THINKING|><|START_RESPONSE|>Sunny.<|END_RESPONSE|>",
              enable_thinking=enable_thinking)
    assert (m["reasoning_content"], m["content"]) == ("hmm", "Sunny.")
    m = parse(R7B, "<|START_RESPONSE|>Sunny.<|END_RESPONSE|>", enable_thinking=enable_thinking)
    assert (m["reasoning_content"], m["content"]) == (None, "Sunny.")


# --------------------------------------------------------------------------- precision

@pytest.mark.parametrize("tools", [TOOLS, None])
def test_json_in_prose_is_never_a_call(tools):
    text = 'In JSON, an object looks like {"name": "Alice", "age": 3}.'
    m = parse(LLAMA32, text, tools=tools)
    assert m["content"] == text and "tool_calls" not in m


@pytest.mark.parametrize("text", ["Use \n<tool_call> for tools.", "Use  <tool_call>", "a\n\n<tool_call>\n{oops}"])
def test_whitespace_before_a_marker_that_opens_nothing_stays_content(text):
    assert parse(QWEN25, text)["content"] == text


def test_bare_json_is_a_call_only_to_a_tool_of_the_request():
    assert calls(parse(LLAMA32, '{"name": "get_weather", "parameters": {"city": "Paris"}}')) == [
        ("get_weather", {"city": "Paris"})]
    m = parse(LLAMA32, '{"name": "Alice", "parameters": {}}')
    assert m["content"] == '{"name": "Alice", "parameters": {}}' and "tool_calls" not in m


def test_a_fenced_code_block_showing_a_call_stays_content():
    text = 'Like this:\n```\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n```\n'
    m = parse("llama.cpp/Qwen-Qwen2.5-7B-Instruct.jinja", text)
    assert m["content"] == text and "tool_calls" not in m


# --------------------------------------------------------------------------- truncation, long outputs

def test_a_truncated_argument_value_keeps_its_text():
    m = parse("llama.cpp/google-gemma-4-31B-it.jinja", '<|tool_call>call:get_weather{city:<|"|>London')
    assert calls(m) == [("get_weather", {"city": "London"})] and "parse_error" in m


def test_long_tagged_outputs_stream_in_small_chunks():
    """24 GLM calls in 8-character chunks (the stream once raised inside the input buffer)."""
    one = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    text = "\n".join([one] * 24)
    parser = generate_parser(analysis("llama.cpp/GLM-4.6.jinja"), tools=TOOLS).parser
    stream = parser.stream()
    for i in range(0, len(text), 8):
        stream.feed(text[i:i + 8])
    message = stream.finish()[0]
    assert len(message["tool_calls"]) == 24 and message == parser.parse(text)


def test_a_generation_prompt_that_depends_on_tools():
    """The template closes reasoning in the prompt only when the request has tools."""
    from chat_autoparser.analyzer import from_string
    src = ("{%- if tools %}<|system|>Tools: {{ tools | tojson }}<|end|>{% endif -%}"
           "{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor -%}"
           "{%- if add_generation_prompt %}<|assistant|><think>{% if tools %}</think>{% endif %}{% endif %}")
    a = analyze_template(from_string(src))
    assert generate_parser(a).parser.parse("hello")["reasoning_content"] == "hello"
    with_tools = generate_parser(a, tools=TOOLS)
    assert with_tools.parser.parse("hello")["content"] == "hello"
    assert with_tools.start["reasoning_mode"] == "REASONING_DISABLED"


def test_a_call_syntax_only_the_instructions_show():
    """The template never renders a call; its tool instructions show the tagged syntax by example."""
    m = parse("extra/THUDM-glm-4-9b-chat-vllm_tool_glm4.jinja",
              "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>")
    assert calls(m) == [("get_weather", {"city": "Paris"})]


def test_implicit_reasoning_ended_by_a_phrase_the_template_names():
    m = parse("extra/ServiceNow-AI-Apriel-1.6-15b-Thinker.jinja", "Let me think.\n[BEGIN FINAL RESPONSE]\nThe answer.")
    assert (m["reasoning_content"], m["content"]) == ("Let me think.", "The answer.")


def test_parallel_calls_of_a_format_that_names_calls_only_in_their_ids():
    call = "<|tool_call_begin|>functions.{}:{}<|tool_call_argument_begin|>{}<|tool_call_end|>"
    text = ("<|tool_calls_section_begin|>" + call.format("get_weather", 0, '{"city": "Paris"}')
            + call.format("search", 1, '{"query": "x"}') + "<|tool_calls_section_end|>")
    m = parse("extra/moonshotai-Kimi-K2.5.jinja", text, enable_thinking=False)
    assert calls(m) == [("get_weather", {"city": "Paris"}), ("search", {"query": "x"})]


# --------------------------------------------------------------------------- strict

def strict_error(name: str, text: str, **kwargs):
    """The ParseError a strict parse raises (streamed and one-shot alike), None when it accepts."""
    kwargs.setdefault("tools", TOOLS)
    parser = generate_parser(analysis(name), **kwargs).parser
    outcomes = []
    for run in (lambda: parser.parse(text, strict=True), lambda: parser.stream(strict=True).whole(text)):
        try:
            run()
            outcomes.append(None)
        except ParseError as e:
            outcomes.append((str(e), e.position))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


@pytest.mark.parametrize("name, text, what", [
    (QWEN25, '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>', "'parameters' key"),
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>',
     "JSON-encoded string"),
    (QWEN25, '<tool_call>\n{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}\n</tool_call>',
     "wrapped in a 'function' object"),
    (QWEN25, '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n</tool_call>', "JSON array"),
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n'
             '{"name": "search", "arguments": {"query": "x"}}\n</tool_call>', None),
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n<tool_call>\n'
             '{"name": "search", "arguments": {"query": "x"}}\n</tool_call>', "'</tool_call>' missing"),
    (QWEN_THINKING, "<think>\nhmm\n</think>\n\nHi", "reasoning start written again"),
    (LLAMA31, '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', "opened by '<|python_tag|>'"),
    ("llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja",
     '[TOOL_CALLS]{"name": "get_weather", "arguments": {"city": "Paris"}}', "not in a JSON array"),
    ("extra/baseten-Llama-3.2-3B-Instruct-pythonic.jinja", "[get_weather(city=\"Paris\")]", "quoted with \""),
    ("llama.cpp/Qwen3.5-4B.jinja", '</think>\n\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n'
                                   '</function>', "without the tool section's opener"),
    ("llama.cpp/Qwen3.5-4B.jinja", '<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>',
     "reasoning was not closed"),
])
def test_strict_refuses_each_form_the_template_does_not_write(name, text, what):
    """The lenient parser reads these; a strict parse refuses each, saying what and where. The
    parallel calls exactly as the template writes them are accepted."""
    err = strict_error(name, text)
    if what is None:
        assert err is None
    else:
        assert err is not None and what in err[0], err
        assert 0 <= err[1] <= len(text)


def test_strict_accepts_whitespace_and_json_layout():
    assert strict_error(QWEN25, '\n\n<tool_call>\n  {"name":"get_weather",\n "arguments":{"city":"Paris"}}  </tool_call>') \
        is None


def test_a_whole_output_is_read_without_the_coroutine_path(monkeypatch):
    """One-shot, each segment of an output with reasoning, content and calls is read by the
    parsers' fast paths: none of them gives up (``SLOW``) and sends the segment back to be read
    again as a coroutine."""
    import chat_autoparser.generator.recovery as recovery

    given_up: list[int] = []
    rollback = recovery.rollback
    monkeypatch.setattr(recovery, "rollback", lambda inp, m: given_up.append(m) or rollback(inp, m))
    parser = generate_parser(analyze_template("templates/chatml-think.jinja"), tools=TOOLS).parser
    text = ('<think>\nhmm\n</think>\nHi\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            '</tool_call>')
    message = parser.parse(text)
    assert (message["reasoning_content"], message["content"]) == ("hmm", "Hi")
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert given_up == []
