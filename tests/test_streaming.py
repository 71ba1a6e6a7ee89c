"""Streaming = one-shot: every corpus-rendered output, fed in random chunkings, gives the message
``parse(text)`` gives, and the OpenAI deltas read off the events add up to that message.

The outputs are the generated parts of the fixed-point renders (``generator.verify.fixed_point``); the
chunkings are drawn by hypothesis (derandomized, so a CI failure reproduces), plus one
character at a time, the harshest split.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chat_autoparser.errors import ParseError
from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
from chat_autoparser.generator import as_delta, generate_parser

CORPUS_SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def stream_parse(parser, chunks: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    s = parser.stream()
    events: list[dict[str, Any]] = []
    for c in chunks:
        events += s.feed(c)
    message, tail = s.finish()
    return message, events + tail


def accumulate(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What an OpenAI client builds from the deltas."""
    text = {"content": "", "reasoning_content": ""}
    calls: dict[int, dict[str, Any]] = {}
    for ev in events:
        d = as_delta(ev)
        if d is None:
            continue
        for k in text:
            text[k] += d.get(k, "")
        for tc in d.get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
            if tc.get("id") is not None:
                slot["id"] = tc["id"]
            fn = tc.get("function", {})
            slot["name"] += fn.get("name", "")
            slot["arguments"] += fn.get("arguments", "")
    return {"content": text["content"] or None, "reasoning_content": text["reasoning_content"] or None,
            "tool_calls": [calls[i] for i in sorted(calls)]}


def final_fields(message: dict[str, Any]) -> dict[str, Any]:
    return {"content": message.get("content"), "reasoning_content": message.get("reasoning_content"),
            "tool_calls": [{"id": c.get("id"), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                           for c in message.get("tool_calls") or []]}


def split(text: str, cuts: set[int]) -> list[str]:
    points = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [text[a:b] for a, b in zip(points, points[1:]) if b > a]


def strict_outcome(parse) -> str | None:
    """What a strict parse raises (message and position), None when it accepts."""
    try:
        parse()
    except ParseError as e:
        return f"{e} @ {e.position}"
    return None


def check_stream(parser, text: str, chunks: list[str]) -> None:
    one_shot = parser.parse(text)
    streamed, events = stream_parse(parser, chunks)
    assert streamed == one_shot, f"chunks {chunks!r}"
    assert accumulate(events) == final_fields(one_shot), f"deltas differ from the message; chunks {chunks!r}"

    def strict_stream() -> None:
        s = parser.stream(strict=True)
        for c in chunks:
            s.feed(c)
        s.finish()
    assert strict_outcome(strict_stream) == strict_outcome(lambda: parser.parse(text, strict=True)), \
        f"strict streaming differs from strict one-shot; chunks {chunks!r}"


def mutations(text: str, data) -> list[str]:
    """Broken variants of a real output: cut off (max_tokens), a span deleted, a span doubled."""
    if len(text) < 2:
        return []
    a = data.draw(st.integers(0, len(text) - 1), label="a")
    b = data.draw(st.integers(a + 1, len(text)), label="b")
    return [text[:a], text[:a] + text[b:], text[:b] + text[a:]]


def _cases(analysis, fixed: dict) -> list[tuple[Any, str]]:
    out, parsers = [], {}
    for r in fixed.values():
        if r.skipped or not r.generated:
            continue
        key = (r.with_tools, r.enable_thinking)
        if key not in parsers:
            parsers[key] = generate_parser(analysis, tools=RT_TOOLS if r.with_tools else None,
                                           enable_thinking=r.enable_thinking).parser
        out.append((parsers[key], r.generated))
    return out


def test_stream_equals_parse(corpus_entry, analyzed, fixed_points):
    fixed = fixed_points(corpus_entry.path)
    if not fixed:
        pytest.skip("no analysis (its error is checked by test_golden)")
    cases = _cases(analyzed(corpus_entry.path), fixed)
    if not cases:
        pytest.skip("no rendered output to stream (every scenario is skipped)")
    for parser, text in cases:
        check_stream(parser, text, list(text))  # one character at a time

    @CORPUS_SETTINGS
    @given(data=st.data())
    def random_chunkings(data):
        parser, text = cases[data.draw(st.integers(0, len(cases) - 1), label="case")]
        text = data.draw(st.sampled_from([text, *mutations(text, data)]), label="text")
        cuts = data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=40), label="cuts")
        check_stream(parser, text, split(text, cuts))

    random_chunkings()


# ----------------------------------------------------------------- our own template, random text

def _own_parser():
    from chat_autoparser.analyzer import analyze_template
    return generate_parser(analyze_template("templates/chatml-think.jinja"), tools=RT_TOOLS).parser


PARSER = _own_parser()
PIECES = st.sampled_from([
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "<", "</", "<tool", "\n", " ", "{",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}', '"', "\\", "}", "Hello", "日本", "🎉",
])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=14), data=st.data())
def test_random_output_streams_like_one_shot(parts, data):
    """Any text, markers and fragments in any order, in any chunking: the same message, no
    exception, and deltas that add up to it."""
    text = "".join(parts)
    cuts = data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=20))
    check_stream(PARSER, text, split(text, cuts))


WS_PIECES = st.sampled_from([" ", "\n", "\t", "  \n", "\n\n", "word", "日本", "<think>", "</think>", "<tool_call>",
                             "</tool_call>", '{"name": "get_weather", "arguments": {"city": " Paris\\n "}}'])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(WS_PIECES, max_size=16), data=st.data())
def test_whitespace_at_chunk_ends_streams_like_one_shot(parts, data):
    """Whitespace that a marker may take before it is held back at a chunk's end and emitted
    with the text that goes on: chunks of whitespace only, or ending in it, read as at once."""
    text = "".join(parts)
    bounds = [sum(map(len, parts[:i])) for i in range(1, len(parts))]
    cuts = data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=10))
    check_stream(PARSER, text, split(text, set(bounds) | cuts))


def test_only_whitespace_a_marker_may_take_is_held_back():
    """The markers after reasoning take spaces only as the indentation of a line: spaces after
    text go out with their chunk (also once a space was held), a line break inside a chunk does
    too, and only a line break at a chunk's end, with the spaces after it, waits for what follows."""
    s = PARSER.stream()
    sent = [[e["text"] for e in s.feed(c) if e["type"] == "region_chunk"]
            for c in ("<think>\nhello ", "abc ", "de\nfg", "hi\n", "  ", "x", " y\n", "</think>")]
    assert sent == [["hello"], [" abc "], ["de\nfg"], ["hi"], [], ["\n  x"], [" y"], []]
    assert s.finish()[0]["reasoning_content"] == "hello abc de\nfghi\n  x y"


JSON_PIECES = st.sampled_from([
    "{", "}", "[", "]", ":", ",", " ", "\n", '"', "\\", '\\"', '"name"', '"arguments"', '"id"', '"type"',
    '"get_weather"', '"Paris"', '{"function": ', '"function"', "12", "-3.5e2", "1e", "true", "nul", "日本",
    '{"city": "Paris"}', '"x\ny"',
])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(JSON_PIECES, max_size=24), data=st.data())
def test_json_call_objects_stream_like_one_shot(parts, data):
    """Call objects whole, broken or cut off (wrappers, repeated or missing fields, invalid
    values, escapes), in any chunking: read between chunks the same as at once."""
    text = "<tool_call>\n" + "".join(parts) + data.draw(st.sampled_from(["\n</tool_call>", "", "}\n</tool_call>"]))
    cuts = data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=30))
    check_stream(PARSER, text, split(text, cuts))


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_characters="<"), max_size=60))
@example(text="\n\n```\n")  # (whitespace before a fenced block at the start is content too)
def test_plain_text_is_content_verbatim(text):
    """Text without markers is content, every character of it (none dropped, none added)."""
    msg = PARSER.parse(text)
    assert (msg["content"] or "") == text
    assert not msg.get("tool_calls") and not msg.get("reasoning_content")
