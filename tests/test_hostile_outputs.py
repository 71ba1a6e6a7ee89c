"""Hostile and malformed model output (issue 12's parser findings, each on the corpus template
named): a malformed call never takes text from a neighbour, nothing is lost, and what cannot be
classified is reported (``parse_error``; ``strict=True`` raises exactly then)."""

from __future__ import annotations

import re

import pytest

from chat_autoparser.generator import generate_parser
from test_parser import QWEN25, TOOLS, analysis, calls, parse, strict_error

KIMI = "llama.cpp/Kimi-K2-Instruct.jinja"
FUNCTIONARY = "llama.cpp/meetkai-functionary-medium-v3.2.jinja"
MISTRAL = "llama.cpp/Mistral-Small-3.2-24B-Instruct-2506.jinja"
GPT_OSS = "llama.cpp/openai-gpt-oss-120b.jinja"

KIMI_TWO = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
            '{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>'
            '{"query": "x"}<|tool_call_end|><|tool_calls_section_end|>')


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


def kept(message: dict) -> str:
    """Everything the message holds, as one text."""
    parts = [message.get("content") or "", message.get("reasoning_content") or ""]
    parts += [c["function"]["name"] + " " + c["function"]["arguments"] for c in message.get("tool_calls") or []]
    return " ".join(parts)


def test_arguments_under_a_key_the_template_does_not_write_are_kept_and_reported():
    text = '<tool_call>\n{"name": "get_weather", "argumnts": {"city": "Paris"}}\n</tool_call>'
    message = parse(QWEN25, text)
    assert calls(message) == [("get_weather", {"city": "Paris"})]  # was {}: the arguments lost
    assert "argumnts" in message["parse_error"]["message"]
    assert strict_error(QWEN25, text) is not None


@pytest.mark.parametrize("broken, lost", [
    (KIMI_TWO.replace("get_weather:0<|tool_call_argument_begin|>", "get_weather:0"), "missing argument marker"),
    (KIMI_TWO.replace("functions.get_weather:0", "functions.get_weather0"), "missing ':'"),
])
def test_a_call_missing_a_marker_does_not_take_its_neighbour(broken, lost):
    message = parse(KIMI, broken)
    assert ("search", {"query": "x"}) in calls(message), lost  # the next call is its own
    assert all("<|" not in name for name, _ in calls(message))  # no markers read into a name
    assert "Paris" in (message.get("content") or ""), "the broken call's text is content"
    assert message.get("parse_error")
    assert strict_error(KIMI, broken) is not None


@pytest.mark.parametrize("text, content", [
    ("all\nHello<|eot_id|>more text", "Hellomore text"),  # text after the end of the turn
    ("get_weath", "get_weath"),  # a recipient line cut short
    ("Hi", "Hi"),  # no recipient at all
])
def test_recipient_format_keeps_every_word(text, content):
    message = parse(FUNCTIONARY, text)
    assert message["content"] == content
    assert not message.get("tool_calls")


def test_recipient_format_calls_still_read():
    message = parse(FUNCTIONARY, 'all\nHi there>>>get_weather\n{"city": "Paris"}')
    assert message["content"] == "Hi there" and calls(message) == [("get_weather", {"city": "Paris"})]
    assert calls(parse(FUNCTIONARY, 'get_weather\n{"city": "Paris"}')) == [("get_weather", {"city": "Paris"})]


def test_arguments_that_are_not_an_object_are_reported():
    text = '[TOOL_CALLS]get_weather[ARGS]"city": "Paris"}'
    message = parse(MISTRAL, text)
    assert "not a JSON object" in message["parse_error"]["message"]
    assert words(text) - {"TOOL_CALLS", "ARGS"} <= words(kept(message))
    assert strict_error(MISTRAL, text) is not None


def test_a_call_with_an_empty_name_is_content():
    text = '<tool_call>\n{"name": "", "id": "search", "arguments": {"city": "Paris"}}\n</tool_call>'
    message = parse(QWEN25, text)
    assert not message.get("tool_calls") and message["content"] == text and message["parse_error"]


def test_a_stray_character_in_a_channel_header_keeps_the_text():
    text = "<|channel|>analysisx<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>Hi"
    message = parse(GPT_OSS, text)
    assert message.get("parse_error")
    assert {"thinking", "Hi"} <= words(kept(message)) | {w for w in ("thinking", "Hi") if w in kept(message)}


def test_a_call_cut_short_after_a_whole_call_keeps_its_text():
    text = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n"
            "<tool_call>search\n<")
    message = parse("llama.cpp/GLM-4.6.jinja", text)
    assert calls(message) == [("get_weather", {"city": "Paris"})]
    assert message["content"] == "<tool_call>search\n<" and message["parse_error"]


@pytest.mark.parametrize("name, text, kept_text", [
    # a call object cut inside its second key: the key's text is content (was lost)
    (QWEN25, '<tool_call>\n{"name": "search", "argu', ', "argu'),
    # the second object of an array cut short after a whole first one (was lost: the first call's
    # end was not recorded by the JSON reader)
    ("llama.cpp/Apertus-8B-Instruct.jinja",
     '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"search', ', {"search'),
])
def test_a_call_cut_short_keeps_the_text_it_did_not_read(name, text, kept_text):
    message = parse(name, text)
    assert message["content"] == kept_text and message["parse_error"]


def test_a_named_call_cut_short_streams_like_one_shot():
    """A call shown already (its name and a value streamed) keeps what it read; only the rest is
    content, in one-shot as in streaming (one-shot resumed at the previous call's end, repeating
    the streamed text; streaming could not, the text being gone)."""
    text = ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
            "<tool_call>search<arg_key>query</arg_key><arg_value>chat templates</arg_value><arg_key>lim")
    message = parse("llama.cpp/GLM-4.6.jinja", text)  # (parse checks streaming = one-shot)
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather", "search"]
    assert "chat templates" in message["tool_calls"][1]["function"]["arguments"]
    assert not message["content"] and message["parse_error"]


@pytest.mark.parametrize("header", ["<|channel|>analysis", "<|channel|>analysis<|mess}age|>"])
def test_a_broken_channel_header_does_not_run_into_the_next_message(header):
    """A header without its end marker ran up to the next message's, over its end and the next
    call's recipient: the reasoning was lost with no error, and the call read with it."""
    text = (header + "The answer is 42.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
            '<|message|>{"city": "Paris"}<|call|>')
    message = parse(GPT_OSS, text)
    assert message["content"] == header + "The answer is 42." and message["parse_error"]
    assert calls(message) == [("get_weather", {"city": "Paris"})]


def test_a_parameter_written_twice_is_reported():
    """The arguments keep both values (as written), but JSON readers keep only the last: the
    first would be lost without a word."""
    text = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=city>\nLyon\n</parameter>\n</function>\n</tool_call>")
    message = parse("llama.cpp/Qwen3-Coder.jinja", text)
    assert message["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "city": "Lyon"}'
    assert "'city'" in message["parse_error"]["message"]
    assert strict_error("llama.cpp/Qwen3-Coder.jinja", text) is not None


def test_keys_the_template_does_not_write_in_a_call_object_are_content():
    """A brace closed too early leaves argument keys in the call object: they were skipped
    without a word; the OpenAI call object's own keys (``type``) are still skipped quietly."""
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}, "days": 3}}\n</tool_call>'
    message = parse(QWEN25, text)
    assert calls(message) == [("get_weather", {"city": "Paris"})]
    assert message["content"].startswith('"days": 3') and "'days'" in message["parse_error"]["message"]
    quiet = '<tool_call>\n{"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert "parse_error" not in parse(QWEN25, quiet)


def test_keys_after_a_name_written_as_the_key_are_content():
    """``{"get_weather": {...}, "days": 3}``: the keys after the name's were dropped, reported
    as ignored (found by the slow hypothesis run on Apertus)."""
    text = '<|tools_prefix|>[{"get_weather": {"city": "Paris"}, "days": 3, "metric": true}}]<|tools_suffix|>'
    message = parse("llama.cpp/Apertus-8B-Instruct.jinja", text)
    assert calls(message) == [("get_weather", {"city": "Paris"})]
    assert words("days 3 metric true") <= words(message["content"]) and "'days'" in message["parse_error"]["message"]


@pytest.mark.parametrize("text", ['["a" "b"]', "['a' 'b']", '{"k": "a"\n "b"}'])
def test_python_literals_never_join_strings_written_side_by_side(text):
    """Python reads ``["a" "b"]`` as ``["ab"]``: a forgotten comma merged two values."""
    from chat_autoparser.analyzer.structures import ValueFormat
    from chat_autoparser.generator.values import parse_value
    with pytest.raises(ValueError):
        parse_value(text, ValueFormat(kind="python_repr"))


def test_an_index_never_takes_a_name():
    """A ':' moved into the namespace (``functio:ns.search:1``): the index slot held the rest of
    the name and dropped it; an index is digits, so the call fails there and its text is kept."""
    broken = KIMI_TWO.replace("functions.search:1", "functio:ns.search:1")
    message = parse(KIMI, broken)
    assert "ns.search" in kept(message)
    assert message.get("parse_error")
    assert ("get_weather", {"city": "Paris"}) in calls(message)


def test_a_stray_key_in_a_call_never_shown_is_content_once():
    """The field was kept as content and the broken call's text too: written twice (one-shot
    and streaming then also differed)."""
    text = '<tool_call>\n{"city": "Paris"}{"function": :\n'
    assert parse(QWEN25, text)["content"] == text  # (parse() also streams it)


@pytest.mark.parametrize("text", ['<tool_call>\n{{}: 1}\n</tool_call>', '<tool_call>\n{[]: 1}\n</tool_call>'])
def test_a_json_key_that_is_not_a_string_is_no_call(text):
    """A key read as any JSON value was looked up among the name fields: ``{}`` raised TypeError
    (unhashable) out of a non-strict parse."""
    message = parse(QWEN25, text)
    assert message["content"] == text and "tool_calls" not in message and message["parse_error"]


@pytest.mark.parametrize("name, text", [
    # a call without a name broken after a whole one: the text the value scanner had read,
    # untagged, was dropped from the input before the segment's abort wrote it as content
    ("extra/NousResearch-Kimi-K2-Thinking-Alternate-Tokenizer.jinja",
     '<tool_call>{"":"","arguments":}</tool_call><tool_call>{"name":[i'),
    # a fence passed over at the start of a name, then a chunk ending inside the next one: the
    # next search began inside the fence passed over and took its '>' for the name's end
    ("extra/Qwen-Qwen-AgentWorld-35B-A3B.jinja",
     "<tool_call>\n<function=</function></function>>\n</function>\n</tool_call><|im_end|>\n"),
])
def test_streamed_in_two_at_any_point_is_one_shot(name, text):
    """Found by a review's fuzzing (both before this stop's changes too)."""
    parser = generate_parser(analysis(name), tools=TOOLS, enable_thinking=False).parser
    one = parser.parse(text)
    assert "tool_calls" not in one and one["content"] == text.removesuffix("<|im_end|>\n")
    for cut in range(1, len(text)):
        stream = parser.stream()
        stream.feed(text[:cut])
        stream.feed(text[cut:])
        assert stream.finish()[0] == one, cut
