"""Malformed model output: never an exception (unless ``strict``), nothing lost, errors reported.

The cases follow the ways real outputs break (see ``../shared/notes/hf-response-parser-bench.md``):
unclosed tags, broken JSON, unknown tool names, output cut off mid-call, reasoning never
closed, markers inside argument strings, partial markers at the end.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_autoparser.analyzer import analyze_template
from chat_autoparser.errors import ParseError
from chat_autoparser.generator import generate_parser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
PARSER = generate_parser(analyze_template("templates/chatml-think.jinja"), tools=TOOLS).parser
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


def kept(message: dict) -> str:
    """Everything the message holds as text."""
    parts = [message.get("reasoning_content") or "", message.get("content") or ""]
    for c in message.get("tool_calls") or []:
        parts += [c["function"]["name"], c["function"]["arguments"], c.get("id") or ""]
    return "\n".join(parts)


def assert_nothing_lost(text: str, message: dict) -> None:
    """Every word of the output that is not part of a marker is somewhere in the message."""
    markers = {"think", "tool", "call", "im", "end", "name", "arguments"}  # the format's own words
    have = " ".join(words(kept(message)))
    for w in words(text):
        if w.lower() not in markers:
            assert w in have, f"{w!r} lost from {text!r}: {message}"


CASES = {
    "unclosed call, complete JSON": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', 1),
    "cut off inside the arguments": ('Let me see.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa', 1),
    "invalid JSON in a closed call": ('<tool_call>\n{"name": "get_weather", "arguments": {city: Paris}}\n</tool_call>', 1),
    "cut off inside the name": ('<tool_call>\n{"name": "get_wea', None),
    "unknown tool": ('<tool_call>\n{"name": "launch_rocket", "arguments": {"to": "Mars"}}\n</tool_call>', 1),
    "reasoning never closed": ("<think>\nStill thinking about Paris", 0),
    "partial marker at the end": ("Hello there <tool_c", 0),
    "stray closing tag": ("Answer first.</tool_call> and more text", 0),
    "call inside broken reasoning": ("<think>\nPlan: " + CALL, 1),  # the unclosed block ends at the call
    "call without a name": ('<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>', 0),
    "arguments first, cut off before the name": ('<tool_call>{"arguments":"Paris"', 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_never_raises_and_keeps_everything(name):
    text, n_calls = CASES[name]
    msg = PARSER.parse(text)
    assert_nothing_lost(text, msg)
    if n_calls is not None:
        assert len(msg.get("tool_calls") or []) == n_calls, msg
    stream = PARSER.stream()
    for i in range(0, len(text), 3):
        stream.feed(text[i:i + 3])
    assert stream.finish()[0] == msg


@pytest.mark.parametrize("text", [CASES["call without a name"][0], CASES["arguments first, cut off before the name"][0],
                                  'A <tool_call>{"id": "x", "arguments": {"a": 1}}</tool_call> B'])
def test_call_without_a_name_is_kept_verbatim(text):
    """Markup included: a call that never names its function is shown as the model wrote it."""
    msg = PARSER.parse(text)
    assert msg["content"] == text and "tool_calls" not in msg, msg
    assert "without a name" in msg["parse_error"]["message"]
    for size in (1, 2, 5):
        stream = PARSER.stream()
        deltas = [e["text"] for i in range(0, len(text), size) for e in stream.feed(text[i:i + size])
                  if e["type"] == "region_chunk" and e["field"] == "content"]
        message, last = stream.finish()
        deltas += [e["text"] for e in last if e["type"] == "region_chunk" and e["field"] == "content"]
        assert message == msg and "".join(deltas) == text, size


def test_errors_are_reported_with_a_position():
    for name in ("cut off inside the arguments", "invalid JSON in a closed call", "unclosed call, complete JSON"):
        msg = PARSER.parse(CASES[name][0])
        err = msg["parse_error"]
        assert isinstance(err["position"], int) and err["message"], name
    assert "parse_error" not in PARSER.parse("Sure.\n" + CALL)


def test_strict_raises_parse_error_with_position():
    with pytest.raises(ParseError) as e:
        PARSER.parse(CASES["invalid JSON in a closed call"][0], strict=True)
    assert e.value.position is not None and "position" in str(e.value)
    assert PARSER.parse("Sure.\n" + CALL, strict=True)["tool_calls"]


def test_invalid_arguments_keep_the_raw_text():
    msg = PARSER.parse(CASES["invalid JSON in a closed call"][0])
    assert msg["tool_calls"][0]["function"]["arguments"] == "{city: Paris}"


def test_unknown_tool_is_kept_and_reported():
    msg = PARSER.parse(CASES["unknown tool"][0])
    assert msg["tool_calls"][0]["function"]["name"] == "launch_rocket"
    assert any("launch_rocket" in w for w in msg.get("parse_warnings", []))


def test_marker_inside_a_json_string_does_not_close_the_call():
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "</tool_call> <think>"}}\n</tool_call>'
    msg = PARSER.parse(text)
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"city": "</tool_call> <think>"}'
    assert msg["content"] is None and "parse_error" not in msg


def test_text_around_calls_stays_in_order():
    msg = PARSER.parse("Before.\n" + CALL + "\n" + CALL + "\nAfter.")
    assert len(msg["tool_calls"]) == 2
    assert msg["content"].index("Before.") < msg["content"].index("After.")


def test_reasoning_forced_open_keeps_a_cut_off_thought():
    """A forced-open prompt: output before the end marker is reasoning even if it never closes."""
    from chat_autoparser.analyzer import from_string
    t = from_string("{% for m in messages %}<|u|>{{ m.content }}{% endfor %}"
                    "{% if add_generation_prompt %}<|a|><think>\n{% endif %}", name="forced.jinja")
    parser = generate_parser(analyze_template(t)).parser
    assert parser.parse("cut off mid thought")["reasoning_content"] == "cut off mid thought"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "\n", "{", "}", '"', ":",
                                 ",", '"name"', '"arguments"', '"get_weather"', "Paris", "x"]), max_size=25))
def test_any_soup_of_pieces_parses(pieces):
    text = "".join(pieces)
    msg = PARSER.parse(text)  # never raises
    assert_nothing_lost(text, msg)
