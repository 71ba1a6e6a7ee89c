"""The PEG runtime (``generator.peg``) on its own: each combinator one-shot and streamed in every
chunking, so a change in the runtime is caught here in seconds, not by the corpus minutes later."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_autoparser.generator.peg import (FAIL, Attempt, Capture, Choice, Empty, JsonValue, Lit, Marker, Opt, Repeat, Seq, Session,
                           Until, Ws, run_all)


def streamed(parser, chunks: list[str]) -> tuple[int, list[tuple]]:
    s = Session(parser)
    events: list[tuple] = []
    for c in chunks:
        events += s.feed(c)
    end, tail = s.finish()
    return end, events + tail


def merged(events: list[tuple]) -> list[tuple]:
    """Adjacent chunks of one tag joined (chunking decides where chunk events split)."""
    out: list[tuple] = []
    for e in events:
        if e[0] == "chunk" and out and out[-1][0] == "chunk" and out[-1][1] == e[1]:
            out[-1] = ("chunk", e[1], out[-1][2] + e[2])
        else:
            out.append(e)
    return out


def every_split(text: str) -> list[list[str]]:
    """One character at a time, and every cut in two."""
    return [list(text)] + [[text[:i], text[i:]] for i in range(1, len(text))]


def same_streamed(parser, text: str) -> tuple[int, list[tuple]]:
    end, events = run_all(parser, text)
    for chunks in every_split(text):
        s_end, s_events = streamed(parser, chunks)
        assert (s_end, merged(s_events)) == (end, merged(events)), chunks
    return end, merged(events)


# --------------------------------------------------------------------------- markers

def test_marker_takes_the_templates_whitespace_when_present():
    m = Marker("<a>", before="\n", after="\n")
    assert same_streamed(m, "\n<a>\nx")[0] == 5
    assert same_streamed(m, "<a>x")[0] == 3
    assert same_streamed(m, "\n\n<a>")[0] == FAIL  # only the template's whitespace


def test_loose_marker_takes_any_whitespace_on_its_sides():
    m = Marker("<a>").loose()
    assert same_streamed(Seq(m, Lit("x")), "  \n<a>\n\t x")[0] == 10
    assert same_streamed(m, "<a>")[0] == 3
    before_only = Marker("<a>").loose(after=False)
    assert same_streamed(before_only, " <a> x")[0] == 4


def test_ws_is_any_run_of_whitespace():
    assert same_streamed(Seq(Lit("a"), Ws(), Lit("b")), "a \n\tb")[0] == 5
    assert same_streamed(Seq(Lit("a"), Ws(), Lit("b")), "ab")[0] == 2
    assert Ws().nullable() and Seq(Ws(), Lit("b")).first() == ("b",)


# --------------------------------------------------------------------------- text and choices

def test_until_streams_text_and_leaves_the_stop_and_its_whitespace():
    p = Seq(Capture("t", Until([Marker("</a>", before="\n")])), Marker("</a>", before="\n"))
    end, events = same_streamed(p, "hello\n</a>")
    assert end == 10 and events == [("open", "t"), ("chunk", "t", "hello"), ("close", "t")]


def test_until_holds_back_whitespace_a_loose_stop_may_take():
    stop = Marker("</a>").loose()
    p = Seq(Capture("t", Until([stop])), stop, Capture("u", Until([])))
    end, events = same_streamed(p, "x y \n\n </a> z \n")
    assert events == [("open", "t"), ("chunk", "t", "x y"), ("close", "t"), ("open", "u"), ("chunk", "u", "z \n"),
                      ("close", "u")]
    s = Session(Capture("t", Until([stop])))
    assert s.feed("ab \n") == [("open", "t"), ("chunk", "t", "ab")]
    assert s.feed(" \t") == []  # whitespace only: held with what was
    assert s.feed("c ") == [("chunk", "t", " \n \tc")]


def test_until_holds_back_a_partial_stop():
    s = Session(Capture("t", Until([Marker("</a>")])))
    assert s.feed("ab</") == [("open", "t"), ("chunk", "t", "ab")]
    assert s.feed("b") == [("chunk", "t", "</b")]


def test_choice_takes_the_longest_guard_and_never_backtracks():
    c = Choice([(("<a>",), Lit("<a>")), (("<ab>",), Lit("<ab>"))], Empty())
    assert same_streamed(c, "<ab>")[0] == 4
    assert same_streamed(c, "<a>")[0] == 3
    assert same_streamed(c, "x")[0] == 0


def test_repeat_with_separator_and_closer():
    item = Capture("i", Seq(Lit("<i>"), Until([Marker("</i>")]), Lit("</i>")))
    r = Seq(Repeat(item, Lit(","), closers=("]",)), Lit("]"))
    end, events = same_streamed(r, "<i>a</i>,<i>b</i>]")
    assert end == 18 and [e[2] for e in events if e[0] == "chunk"] == ["a", "b"]


def test_opt_guarded():
    p = Seq(Opt(Lit("<x>")), Lit("y"))
    assert same_streamed(p, "<x>y")[0] == 4 and same_streamed(p, "y")[0] == 1


def test_json_value_streams_its_raw_bytes():
    end, events = same_streamed(Capture("j", JsonValue()), ' {"a": [1, "x\\"y"]} rest')
    assert end == 19 and events[1] == ("chunk", "j", '{"a": [1, "x\\"y"]}')
    assert same_streamed(JsonValue(), '{"a" 1}')[0] == FAIL


# --------------------------------------------------------------------------- attempts

CALL = Capture("call", Seq(Lit("<c>"), Capture("name", Until([Marker("</c>")], to_end=False)), Lit("</c>")))


def test_attempt_commits_what_succeeds():
    end, events = same_streamed(Seq(Attempt(CALL), Capture("t", Until([]))), "<c>f</c>rest")
    assert end == 12
    assert events == [("open", "call"), ("open", "name"), ("chunk", "name", "f"), ("close", "name"),
                      ("close", "call"), ("open", "t"), ("chunk", "t", "rest"), ("close", "t")]


def test_attempt_that_fails_leaves_no_trace():
    end, events = same_streamed(Seq(Attempt(CALL), Capture("t", Until([]))), "<c>f unterminated")
    assert end == 17
    assert events == [("open", "t"), ("chunk", "t", "<c>f unterminated"), ("close", "t")]


def test_attempt_rejected_by_its_predicate():
    named_g = Attempt(CALL, accept=lambda evs: ("chunk", "name", "g") in evs)
    _, events = same_streamed(Seq(named_g, Capture("t", Until([]))), "<c>f</c>")
    assert events == [("open", "t"), ("chunk", "t", "<c>f</c>"), ("close", "t")]


def test_streaming_reports_nothing_of_an_attempt_until_it_is_decided():
    s = Session(Seq(Attempt(CALL), Capture("t", Until([]))))
    assert s.feed("<c>fo") == []
    assert s.feed("o</") == []
    assert s.feed("c>") == [("open", "call"), ("open", "name"), ("chunk", "name", "foo"), ("close", "name"),
                            ("close", "call"), ("open", "t")]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["<c>", "</c>", "f", " ", "x", "<", "c>", "</"]), max_size=8),
       st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_attempts_stream_like_one_shot(pieces: list[str], sizes: list[int]) -> None:
    text = "".join(pieces)
    parser = Seq(Attempt(CALL), Capture("t", Until([])))
    chunks, i, k = [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        chunks.append(text[i:i + n])
        i, k = i + n, k + 1
    one = run_all(parser, text)
    two = streamed(parser, chunks)
    assert (one[0], merged(one[1])) == (two[0], merged(two[1]))


@pytest.mark.parametrize("text", ["", "x", "<c>a</c>"])
def test_run_all_and_session_agree_on_edge_inputs(text):
    same_streamed(Seq(Attempt(CALL), Capture("t", Until([]))), text)
