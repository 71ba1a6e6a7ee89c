"""``generator.marker_search``: the grouped search finds what the plain alternation finds (the
first marker, the longest at its position), in long texts where the windows matter."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_autoparser.generator import marker_search as ms
from chat_autoparser.generator.marker_search import marker_search


def plain(literals: list[str], text: str, pos: int) -> tuple[int, str] | None:
    m = re.compile("|".join(re.escape(x) for x in sorted(set(literals), key=len, reverse=True))).search(text, pos)
    return None if m is None else (m.start(), m.group())


def grouped(literals: list[str], text: str, pos: int) -> tuple[int, str] | None:
    m = marker_search(literals)(text, pos)
    return None if m is None else (m.start(), m.group())


MARKERS = ["<tool_call>", "<|im_end|>", "```", "<", "<|tool_call_begin|>", "<|tool_call_begin|>functions.", ":"]


@pytest.mark.parametrize("text", [
    "x" * 5000 + "```" + "y" * 10 + "<tool_call>",
    "x" * 5000 + "<tool_call>" + "```",
    "a" * 100_000 + ":",
    "a" * 100_000,
    "<|tool_call_begin|>functions.f:0",
    "x" * 3000 + "<|tool_call_begin|" + "x" * 3000 + "<|tool_call_begin|>functions.",
])
def test_long_texts(text):
    for pos in (0, 1, 2047, 2048, 4000):
        assert grouped(MARKERS, text, pos) == plain(MARKERS, text, pos)
        assert grouped(MARKERS[:3], text, pos) == plain(MARKERS[:3], text, pos)


def test_a_longer_marker_cut_by_a_window_is_not_taken_short(monkeypatch):
    # the window's limit falls inside the longer marker: the shorter one must not be taken there
    monkeypatch.setattr(ms, "SHORT", 0)
    monkeypatch.setattr(ms, "_WINDOW", 4)
    text = "abcdefgh" + "<|a|>long" + "```"
    for pos in range(len(text)):
        assert grouped(["<|a|>long", "<|a|>", "```"], text, pos) == plain(["<|a|>long", "<|a|>", "```"], text, pos)


def test_empty_literal_refused():
    with pytest.raises(ValueError):
        marker_search(["", "<"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("<|>ab`:", min_size=1, max_size=6), min_size=1, max_size=5),
       st.text("<|>ab`: x", max_size=80), st.integers(0, 6), st.integers(0, 40))
def test_same_as_the_alternation(literals, text, window, pos):
    # tiny windows and no short cut, so that every path of the windowed search runs
    saved = ms.SHORT, ms._WINDOW
    ms.SHORT, ms._WINDOW = 0, window + 1
    try:
        assert grouped(literals, text, pos) == plain(literals, text, pos)
    finally:
        ms.SHORT, ms._WINDOW = saved
