"""Marker shapes (analyzer.markers) and render diffs (analyzer.diff), with property tests."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_autoparser.analyzer.diff import (Diff, common_prefix, common_prefix_len, common_suffix, common_suffix_len,
                           diff, leading_ws, split_around, trailing_ws)
from chat_autoparser.analyzer.markers import (closing_for, is_closing, is_marker, is_opening, markers_in, mentions,
                              mirror_split, opening_for, pairs, stem, tokenize, visible,
                              REASONING_WORDS)

# Opening/closing pairs in every shape the module docstrings name.
PAIRS = [
    ("<think>", "</think>"),
    ("[THINK]", "[/THINK]"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    ("<|turn>", "<turn|>"),
    ("<|open|>", "<|close|>"),
    ("<seed:think>", "</seed:think>"),
    ("[INST]", "[/INST]"),
    ("<|im_start|>", "<|im_end|>"),
    ("<tool_call>", "</tool_call>"),
    ("<|channel>", "<channel|>"),
    ("<|tool_calls_begin|>", "<|tool_calls_end|>"),
    ("<x_begin>", "<x_end>"),
]

NON_PAIRS = [
    ("</think>", "<think>"),            # wrong order
    ("<think>", "</answer>"),          # different names
    ("<think>", "<think>"),            # two openers
    ("</think>", "</think>"),          # two closers
    ("[THINK]", "</THINK>"),           # bracket vs angle
    ("<think>", "[/think]"),
    ("<|turn>", "</turn>"),            # half-open vs tag
    ("<|START_THINKING|>", "<|END_RESPONSE|>"),
    ("<|im_start|>", "<|END_THINKING|>"),
    ("<|open|>", "<turn|>"),
    ("<seed:think>", "</think>"),      # namespace is part of the name
    ("think", "/think"),               # not markers
    ("<think>", "plain text"),
]

MARKERS = sorted({m for pair in PAIRS for m in pair} | {
    "<|eot_id|>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", '<invoke name="get_weather">',
    "<function=f>", "[TOOL_CALLS]", "</tool_call>", "<|\"|>", "<channel|>",
})


# --------------------------------------------------------------------------- tokenize

def test_tokenize_docstring_example() -> None:
    assert [t for t in tokenize("a<think>\nb") if t.strip()] == ["a", "<think>", "b"]
    assert tokenize("a<think>\nb") == ("a", "<think>", "\n", "b")


@pytest.mark.parametrize("marker", MARKERS)
def test_markers_are_single_tokens(marker: str) -> None:
    assert is_marker(marker)
    assert tokenize(marker) == (marker,)
    assert tokenize(f"x {marker}\ny") == ("x", " ", marker, "\n", "y")
    assert markers_in(f"a{marker}b{marker}") == [marker, marker]


def test_tokenize_shapes() -> None:
    assert tokenize("<|im_start|>user\nhi<|im_end|>") == ("<|im_start|>", "user", "\n", "hi", "<|im_end|>")
    assert tokenize('<invoke name="f">') == ('<invoke name="f">',)
    assert tokenize("[/INST] ok") == ("[/INST]", " ", "ok")
    # Whitespace comes one character at a time; words stay whole.
    assert tokenize("a  \n\tb") == ("a", " ", " ", "\n", "\t", "b")
    # Comparison operators and stray brackets are not markers.
    assert tokenize("a < b > c") == ("a", " ", "<", " ", "b", " ", ">", " ", "c")
    assert tokenize("<<think>>") == ("<", "<think>", ">")
    assert not is_marker("<")
    assert not is_marker("< think>")
    assert not is_marker("[1]")
    assert not is_marker("hello")
    assert tokenize("") == ()


@given(st.text())
def test_tokenize_is_lossless(text: str) -> None:
    assert "".join(tokenize(text)) == text


SAFE_PIECES = MARKERS + ["hello", "world", "x", "_", "42", "café", " ", "\n", "\t", "  ", "{", "}",
                         '"', ":", ",", ".", "=", "|", "/", "[", "]", "-"]
ANGLE_MARKERS = [m for m in MARKERS if m.startswith("<")]
ANGLE_PIECES = ANGLE_MARKERS + ["hello", "x", " ", "\n", "<", ">", "/", "=", '"', "|", "{", "}"]


def _check_markers_whole(pieces: list[str]) -> None:
    text = "".join(pieces)
    toks = tokenize(text)
    assert "".join(toks) == text
    starts: dict[int, str] = {}
    pos = 0
    for t in toks:
        starts[pos] = t
        pos += len(t)
    pos = 0
    for p in pieces:
        if p in MARKERS:
            assert starts.get(pos) == p, (text, p, toks)
        pos += len(p)


@given(st.lists(st.sampled_from(SAFE_PIECES), max_size=30))
def test_tokenize_never_splits_markers(pieces: list[str]) -> None:
    _check_markers_whole(pieces)


@given(st.lists(st.sampled_from(ANGLE_PIECES), max_size=30))
def test_tokenize_never_splits_markers_among_stray_angles(pieces: list[str]) -> None:
    _check_markers_whole(pieces)


@given(st.one_of(st.text(), st.lists(st.sampled_from(ANGLE_PIECES + SAFE_PIECES), max_size=30).map("".join)))
def test_markers_in_are_the_marker_tokens(text: str) -> None:
    # the analysis reads a text's markers with one search instead of tokenizing it
    assert markers_in(text) == [t for t in tokenize(text) if is_marker(t)]


# --------------------------------------------------------------------------- stem / pairs

@pytest.mark.parametrize("opening,closing", PAIRS)
def test_pairs(opening: str, closing: str) -> None:
    assert pairs(opening, closing)
    assert not pairs(closing, opening)
    assert is_opening(opening) and not is_closing(opening)
    assert is_closing(closing) and not is_opening(closing)
    so, sc = stem(opening), stem(closing)
    assert so is not None and sc is not None
    assert so[0] == "open" and sc[0] == "close" and so[1] == sc[1]


@pytest.mark.parametrize("a,b", NON_PAIRS)
def test_non_pairs(a: str, b: str) -> None:
    assert not pairs(a, b)


# every pair but those closing_for does not derive from the opening alone
@pytest.mark.parametrize("opening,closing", [p for p in PAIRS if p[0] not in ("[INST]", "<tool_call>", "<x_begin>")])
def test_closing_for_and_opening_for(opening: str, closing: str) -> None:
    assert closing_for(opening) == closing
    assert pairs(opening, closing_for(opening) or "")
    if "begin" not in opening:  # END maps back to START first; BEGIN is not recoverable
        assert opening_for(closing) == opening


def test_closing_for_tags_with_attributes() -> None:
    assert closing_for('<invoke name="get_weather">') == "</invoke>"
    assert closing_for("<function=f>") == "</function>"
    assert pairs('<invoke name="x">', "</invoke>")
    assert pairs("<function=f>", "</function>")
    assert opening_for("</invoke>") == "<invoke>"


def test_closing_for_and_opening_for_refuse_wrong_roles() -> None:
    assert closing_for("</think>") is None
    assert closing_for("[/THINK]") is None
    assert closing_for("<turn|>") is None
    assert closing_for("<|END_THINKING|>") is None
    assert closing_for("plain") is None
    assert opening_for("<think>") is None
    assert opening_for("<|turn>") is None
    assert opening_for("<|START_THINKING|>") is None
    assert opening_for("plain") is None


def test_stem_shapes() -> None:
    assert stem("<think>") == ("open", "<>think")
    assert stem("</think>") == ("close", "<>think")
    assert stem("[THINK]") == ("open", "[]THINK")
    assert stem("[/THINK]") == ("close", "[]THINK")
    assert stem("<|turn>") == ("open", "half:turn")
    assert stem("<turn|>") == ("close", "half:turn")
    assert stem("<|START_THINKING|>") == ("open", "<|>#_THINKING")
    assert stem("<|END_THINKING|>") == ("close", "<|>#_THINKING")
    assert stem("<|open|>") == ("open", "<|>#")
    assert stem("<|close|>") == ("close", "<|>#")
    assert stem('<invoke name="x">') == ("open", "<>invoke")
    assert stem("think") is None
    assert stem("") is None
    # A lower-case name that merely contains "end" inside a word is not a closer.
    assert is_opening("<|endoftext|>")
    assert is_opening("<|eot_id|>")


def test_mentions_and_visible() -> None:
    assert mentions("<|START_THINKING|>", REASONING_WORDS)
    assert mentions("<seed:think>", REASONING_WORDS)
    assert not mentions("<|im_start|>", REASONING_WORDS)
    assert visible("<think>\n") == "<think>↵"
    assert visible(" \t\r\n") == "·⇥␍↵"
    assert visible("") == "∅"


# --------------------------------------------------------------------------- mirror_split

def test_mirror_split_multi_token_sequence() -> None:
    assert mirror_split("<|open|>message<|sep|><|open|>think<|sep|>",
                        "<|close|>think<|sep|><|open|>response") == ("<|open|>think<|sep|>", "<|close|>think<|sep|>")


def test_mirror_split_keeps_opening_whitespace() -> None:
    assert mirror_split("assistant\n<think>\n", "\n</think>\n\n") == ("<think>\n", "</think>")


def test_mirror_split_half_open_with_name() -> None:
    assert mirror_split("<|channel>thought\n", "<channel|>") == ("<|channel>thought\n", "<channel|>")


@pytest.mark.parametrize("opening,closing", PAIRS)
def test_mirror_split_every_pair(opening: str, closing: str) -> None:
    assert mirror_split(f"<|im_start|>assistant\n{opening}", f"{closing}answer") == (opening, closing)


def test_mirror_split_none() -> None:
    assert mirror_split("<think>", "text</think>") is None      # after does not start with a closer
    assert mirror_split("hello", "</think>") is None            # nothing opened
    assert mirror_split("<think>", "</answer>") is None         # does not pair
    assert mirror_split("", "") is None
    assert mirror_split("<think>", "   ") is None
    # The opener must be among the last few tokens of `before`.
    far = "<think>" + " word" * 10
    assert mirror_split(far, "</think>") is None


# --------------------------------------------------------------------------- common prefix / suffix

def test_common_prefix_len_char_and_token_modes() -> None:
    assert common_prefix_len("a<think>b", "a<tool>b") == 3           # 'a<t'
    assert common_prefix_len("a<think>b", "a<tool>b", tokens=True) == 1
    assert common_prefix_len("<think>", "<|START|>") == 1
    assert common_prefix_len("<think>", "<|START|>", tokens=True) == 0
    assert common_prefix_len("hello world", "hello there", tokens=True) == len("hello ")
    assert common_prefix_len("hello", "help", tokens=True) == 0      # words are whole tokens
    assert common_prefix_len("same", "same", tokens=True) == 4
    assert common_prefix_len("", "abc") == 0
    assert common_prefix_len("abc", "abcdef") == 3
    assert common_prefix_len("abc", "abcdef", tokens=True) == 0


def test_common_suffix_len_char_and_token_modes() -> None:
    assert common_suffix_len("x</think>", "y</tool>") == 1
    assert common_suffix_len("x</think>", "y</tool>", tokens=True) == 0
    assert common_suffix_len("A<|im_end|>\n", "B<|im_end|>\n", tokens=True) == len("<|im_end|>\n")
    assert common_suffix_len("A<|im_end|>\n", "B<|im_end|>\n") == len("<|im_end|>\n")
    assert common_suffix_len("ab", "b") == 1
    assert common_suffix_len("ab", "b", tokens=True) == 0
    assert common_suffix_len("xyz", "xyz", limit=2) == 2
    assert common_suffix_len("a bb cc", "x bb cc", tokens=True) == len(" bb cc")
    assert common_suffix_len("a bb cc", "x bb cc", tokens=True, limit=4) == 3  # never cuts a token
    assert common_suffix_len("a bb cc", "x bb cc", limit=4) == 4


def test_token_modes_never_cut_a_marker_at_a_space_inside_it() -> None:
    one, two = 'a\nb <x k="1" j="3">', 'a\nb <x k="2" j="3">'
    assert common_prefix_len(one, two, tokens=True) == len("a\nb ")
    assert common_suffix_len(one, two, tokens=True) == 0


@given(st.one_of(st.text(), st.lists(st.sampled_from(ANGLE_PIECES + SAFE_PIECES), max_size=30).map("".join)))
def test_no_token_holds_a_newline_but_itself(text: str) -> None:
    # what lets the token-mode prefix and suffix tokenize only the line where two texts part
    assert all(t == "\n" or "\n" not in t for t in tokenize(text))


@pytest.mark.parametrize("marker", MARKERS)
def test_a_newline_inside_a_marker_shape_ends_it(marker: str) -> None:
    for i in range(1, len(marker)):
        text = marker[:i] + "\n" + marker[i:]
        assert all(t == "\n" or "\n" not in t for t in tokenize(text)), text


def _token_prefix_of_whole_texts(a: str, b: str) -> int:
    size = 0
    for x, y in zip(tokenize(a), tokenize(b)):
        if x != y:
            break
        size += len(x)
    return size


def _token_suffix_of_whole_texts(a: str, b: str, limit: int | None) -> int:
    size = 0
    for x, y in zip(reversed(tokenize(a)), reversed(tokenize(b))):
        if x != y or (limit is not None and size + len(x) > limit):
            break
        size += len(x)
    return size


_lines = st.lists(st.sampled_from(ANGLE_PIECES + SAFE_PIECES + ["\n", "a\n", "\n<|x|>", '<x k="1">', '<x k="2">']),
                  max_size=25).map("".join)


@settings(max_examples=300)
@given(_lines, _lines, _lines, st.integers(0, 10**6), st.sampled_from("2 \n<>|x"), st.none() | st.integers(0, 60))
def test_token_modes_equal_the_walk_over_whole_texts(shared: str, a: str, b: str, at: int, char: str,
                                                       limit: int | None) -> None:
    text = shared + a
    at %= len(text) + 1
    edited = text[:at] + char + text[at + 1:]  # parts inside a token, a line or a marker
    for x, y in ((shared + a, shared + b), (a + shared, b + shared), (a, b), (text, edited)):
        assert common_prefix_len(x, y, tokens=True) == _token_prefix_of_whole_texts(x, y)
        assert common_suffix_len(x, y, tokens=True, limit=limit) == _token_suffix_of_whole_texts(x, y, limit)


def test_common_prefix_and_suffix_of_many() -> None:
    assert common_prefix(["abc<t>", "abc<u>", "abd"]) == "ab"
    assert common_prefix(["a<think>x", "a<thonk>x"], tokens=True) == "a"
    assert common_prefix(["only"]) == "only"
    assert common_prefix([]) == ""
    assert common_suffix(["x</t>", "yy</t>"]) == "</t>"
    assert common_suffix(["a", "b"]) == ""
    assert common_suffix([]) == ""
    assert common_suffix(["x <end>", "y <end>", "zz <end>"], tokens=True) == " <end>"


def test_diff_docstring_examples() -> None:
    assert common_prefix_len("a<think>b", "a<tool>b", tokens=True) == 1
    assert split_around("x<t>NEEDLE</t>y", "NEEDLE") == ("x<t>", "</t>y")


def test_diff_example() -> None:
    a, b = "abc<think>xyz</think>d", "abc<tool>xyz</tool>d"
    d = diff(a, b)
    assert d == Diff(3, len(a) - 1, len(b) - 1)
    assert d.a_middle(a) == "<think>xyz</think>"
    assert d.b_middle(b) == "<tool>xyz</tool>"
    dc = diff(a, b, tokens=False)
    assert dc.a_middle(a) == "hink>xyz</think" and dc.b_middle(b) == "ool>xyz</tool"


def test_diff_prefix_and_suffix_do_not_overlap() -> None:
    d = diff("aXa", "aXaXa", tokens=False)
    assert d.prefix <= d.a_end and d.prefix <= d.b_end
    assert d.a_middle("aXa") == "" and d.b_middle("aXaXa") == "Xa"


def test_split_around_and_ws_helpers() -> None:
    assert split_around("aNbNc", "N") == ("a", "bNc")
    assert split_around("aNbNc", "N", last=True) == ("aNb", "c")
    assert split_around("abc", "N") is None
    assert leading_ws(" \n x ") == " \n "
    assert trailing_ws(" x \n") == " \n"
    assert leading_ws("x") == "" and trailing_ws("") == ""


# --------------------------------------------------------------------------- diff properties

piece = st.sampled_from(SAFE_PIECES)
texts = st.lists(piece, max_size=15).map("".join)


def _boundaries(text: str) -> set[int]:
    return {0, *itertools.accumulate(len(t) for t in tokenize(text))}


def _check_diff(a: str, b: str, tokens: bool) -> None:
    d = diff(a, b, tokens=tokens)
    assert 0 <= d.prefix <= d.a_end <= len(a)
    assert d.prefix <= d.b_end <= len(b)
    assert a[:d.prefix] == b[:d.prefix]
    assert a[d.a_end:] == b[d.b_end:]
    # Either string rebuilds from the shared parts and its own middle, and each from the other.
    assert a[:d.prefix] + d.a_middle(a) + a[d.a_end:] == a
    assert b[:d.prefix] + d.b_middle(b) + b[d.b_end:] == b
    assert a[:d.prefix] + d.b_middle(b) + a[d.a_end:] == b
    assert b[:d.prefix] + d.a_middle(a) + b[d.b_end:] == a
    if a == b:
        assert d.a_middle(a) == d.b_middle(b) == ""
    if not tokens:
        # Char mode is maximal: the prefix cannot grow, nor the suffix (given the prefix).
        if d.prefix < len(a) and d.prefix < len(b):
            assert a[d.prefix] != b[d.prefix]
        if d.a_end > d.prefix and d.b_end > d.prefix:
            assert a[d.a_end - 1] != b[d.b_end - 1]


@settings(max_examples=300)
@given(texts, texts)
def test_diff_reconstructs_token_mode(a: str, b: str) -> None:
    _check_diff(a, b, tokens=True)


@settings(max_examples=300)
@given(texts, texts)
def test_diff_reconstructs_char_mode(a: str, b: str) -> None:
    _check_diff(a, b, tokens=False)


@given(st.text(max_size=40), st.text(max_size=40))
def test_diff_reconstructs_any_text(a: str, b: str) -> None:
    _check_diff(a, b, tokens=True)
    _check_diff(a, b, tokens=False)


@settings(max_examples=300)
@given(texts, texts, texts)
def test_diff_with_shared_context(p: str, mid: str, s: str) -> None:
    # Two renders that differ only in the middle: the diff stays within it.
    a, b = p + mid + s, p + "<|x|>" + s
    d = diff(a, b, tokens=False)
    assert d.prefix >= len(p)
    assert len(a) - d.a_end >= 0
    _check_diff(a, b, tokens=True)


@settings(max_examples=300)
@given(texts, texts)
def test_token_prefix_never_ends_inside_a_marker(a: str, b: str) -> None:
    p = common_prefix_len(a, b, tokens=True)
    assert a[:p] == b[:p]
    assert p <= common_prefix_len(a, b)
    # The cut is a token boundary of both texts, so no marker of either is cut in half.
    assert p in _boundaries(a) and p in _boundaries(b)
    for text in (a, b):
        pos = 0
        for t in tokenize(text):
            if is_marker(t):
                assert not (pos < p < pos + len(t)), (text, t, p)
            pos += len(t)


@settings(max_examples=300)
@given(texts, texts)
def test_token_suffix_never_starts_inside_a_marker(a: str, b: str) -> None:
    s = common_suffix_len(a, b, tokens=True)
    assert s <= common_suffix_len(a, b)
    assert a[len(a) - s:] == b[len(b) - s:]
    assert len(a) - s in _boundaries(a) and len(b) - s in _boundaries(b)


@settings(max_examples=200)
@given(texts, texts)
def test_token_diff_cuts_on_token_boundaries(a: str, b: str) -> None:
    d = diff(a, b, tokens=True)
    assert d.prefix in _boundaries(a)
    assert d.a_end in _boundaries(a) and d.b_end in _boundaries(b)


@given(st.lists(texts, min_size=1, max_size=4), st.booleans())
def test_common_prefix_suffix_of_many_are_shared(items: list[str], tokens: bool) -> None:
    pre = common_prefix(items, tokens=tokens)
    suf = common_suffix(items, tokens=tokens)
    assert all(t.startswith(pre) for t in items)
    assert all(t.endswith(suf) for t in items)
