"""Calls read whole by their plan (``generator.plan``, the one-shot fast path).

A plan reads a call written exactly as the template writes it, else it reads nothing and the
general parser reads the call. Unit tests on small skeletons, then over the corpus: every
canonical tool-call output of a template whose calls have a plan is read by it (all its calls),
and gives what the general parser gives (``whole(text, plans=False)``); streaming, which never
uses plans, is compared with one-shot parsing by the other corpus suites.
"""

from __future__ import annotations

import pytest

import chat_autoparser.generator.plan as plan_module
from chat_autoparser.generator.json_call import JsonCalls
from chat_autoparser.generator.peg import Input, Lit, Marker, Repeat, Until
from chat_autoparser.generator.plan import JSON, KEY, NAME, UNITS, VALUE, CallPlan, PlannedCall, UnitsPlan, lit_step
from chat_autoparser.generator.verify.deviations import deviations
from test_fuzz_outputs import call_outputs


def _until(*stops: str) -> Until:
    return Until([Marker.stop(s) for s in stops], to_end=False)


XML = CallPlan([lit_step("<tool_call>\n<function=", False, True), (NAME, _until(">")), lit_step(">\n", True, False),
                (UNITS, UnitsPlan([lit_step("<parameter=", False, True), (KEY, _until(">")),
                                   lit_step(">\n", True, True), (VALUE, _until("\n</parameter>")),
                                   lit_step("\n</parameter>\n", True, False)], "<parameter=")),
                lit_step("</function>\n</tool_call>", False, False)])
CALL = "<tool_call>\n<function=f>\n<parameter=a>\nx y\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>"


def test_a_canonical_call_is_read_whole():
    assert XML.read(CALL, 0) == (len(CALL), "f", None, [("a", "x y"), ("b", "2")])
    assert XML.read("  \n" + CALL, 0)[0] == len(CALL) + 3  # (whitespace before a call is the call's)


@pytest.mark.parametrize("text", [
    CALL.replace("<parameter=a>\n", "<parameter=a>"),  # a literal written otherwise
    CALL.replace("x y", "x </parameter> y"),  # a value holding its own stop: the general way decides
    CALL.replace("</function>", "</functon>"),  # the closer misspelt
    CALL[:-5],  # cut short
    CALL.replace("<function=f>", "<function=>"),  # no name
    CALL.replace("<parameter=b>", "<parameter=a>"),  # a key written twice: the general way reports it
])
def test_anything_else_is_left_to_the_general_parser(text):
    assert XML.read(text, 0) is None


def test_a_slot_ends_at_its_stop_only_where_no_other_marker_comes_first():
    plan = CallPlan([lit_step("<call=", False, False), (NAME, _until(">", "</call>")), lit_step(">", True, False),
                     (JSON, None), lit_step("</call>", False, False)])
    assert plan.read('<call=f>{}</call>', 0) == (17, "f", None, "{}")
    assert plan.read('<call=f</call>{}</call>', 0) is None  # (another stop first: the general reader decides)
    long_key = "k" * 300  # (past the window ``str.find`` looks in: the reader's search)
    text = CALL.replace("<parameter=a>", f"<parameter={long_key}>")
    assert XML.read(text, 0) == (len(text), "f", None, [(long_key, "x y"), ("b", "2")])


def test_a_slot_ends_at_its_first_stop_where_the_literal_after_it_must_follow():
    plan = CallPlan([lit_step("<c>", False, True), (NAME, _until("</n>")), lit_step("</n>\n<a>", True, False),
                     (JSON, None), lit_step("</c>", False, False)])
    assert plan.read("<c>f</n>\n<a>{}</c>", 0) == (18, "f", None, "{}")
    assert plan.read("<c>f</n>x</n>\n<a>{}</c>", 0) is None  # (not a later stop the rest follows)
    key = CallPlan([lit_step("<c>", False, True), (NAME, _until(":", "<e>")), lit_step(":", True, False),
                    (JSON, None), lit_step("<e>", False, False)])
    assert key.read("<c>f:{}<e>", 0) == (10, "f", None, "{}")
    assert key.read("<c>f<e>:{}<e>", 0) is None  # (another stop first)


def test_json_arguments_end_where_the_decoder_ends():
    plan = CallPlan([lit_step("[C]", False, True), (NAME, _until("[A]")), lit_step("[A]", True, False),
                     (JSON, None), lit_step("[E]", False, False)])
    text = '[C]f[A] {"a": [1, 2]}[E]'
    assert plan.read(text, 0) == (len(text), "f", None, '{"a": [1, 2]}')
    assert plan.read('[C]f[A]{"a": NaN}[E]', 0) is None  # (the general reader refuses NaN: it decides)
    assert plan.read('[C]f[A]{"a": 1[E]', 0) is None


def test_calls_in_a_row_are_read_at_once_where_no_closer_can_start_like_them():
    call = PlannedCall(Lit("<tool_call>"), XML)  # (the general reader: only its first literal is asked)
    calls = Repeat(call, closers=("</tools>",), skip_ws=True)
    inp = Input()
    inp.set_text(CALL + "\n" + CALL + " " + CALL + "\n</tools>")
    n = len(CALL) + 1  # (a call takes the whitespace after it)
    assert calls.fast(inp, 0) == 3 * n
    assert [(ev[0], ev[1]) for ev in inp.events] == [("whole_call", 0), ("whole_call", n), ("whole_call", 2 * n)]
    inp.set_text(CALL + CALL)
    inp.events.clear()
    assert Repeat(call, max=1, skip_ws=True).fast(inp, 0) == len(CALL) and len(inp.events) == 1
    assert calls._more is not None
    # where a closer could start as a call does, or a separator comes between, each is decided on
    assert Repeat(call, closers=("<tool_call>\n<function=g>",), skip_ws=True)._more is None
    assert Repeat(call, closers=("<tool",), skip_ws=True)._more is None
    assert Repeat(call, sep=Lit(","), closers=("</tools>",), skip_ws=True)._more is None
    assert Repeat(call, closers=("</tools>",))._more is None


def test_json_calls_are_read_in_a_row_only_where_whitespace_between_them_is_the_templates():
    plan = CallPlan([lit_step('<tool_call>\n{"name": "', False, True), (NAME, _until('"')),
                     lit_step('", "arguments": ', True, False), (JSON, None),
                     lit_step("}\n</tool_call>", False, False)], json_strings=True)
    opener, closer = Marker.stop("<tool_call>"), Marker.stop("</tool_call>")
    for sep, in_a_row in (("", True), (None, True), (",", False)):  # (with ",", whitespace is a deviation)
        assert JsonCalls(Lit("{"), opener, closer, sep=sep, plan=plan)._in_a_row is in_a_row
    assert not JsonCalls(Lit("{"), sep="", plan=plan)._in_a_row  # (no frame: "{" starts them)
    semi = CallPlan([lit_step(';{"name": "', False, True), (NAME, _until('"')),
                     lit_step('", "arguments": ', True, False), (JSON, None), lit_step("}", False, False)],
                    json_strings=True)
    assert not JsonCalls(Lit("{"), Marker.stop(";"), sep="", plan=semi)._in_a_row  # (";" also separates calls)


# --------------------------------------------------------------------------- over the corpus

def _has_plan(parser) -> bool:
    seen, todo = set(), [parser.grammar]
    while todo:
        p = todo.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        if isinstance(p, PlannedCall) or isinstance(getattr(p, "plan", None), CallPlan):  # (JSON calls)
            return True
        for v in vars(p).values() if hasattr(p, "__dict__") else ():
            items = v if isinstance(v, (list, tuple)) else [v]
            for x in items:
                if isinstance(x, tuple):
                    todo += [y for y in x if hasattr(y, "fast")]
                elif hasattr(x, "fast"):
                    todo.append(x)
    return False


class _Reads:
    """Where plans read a call (a call may be read more than once: an attempt, then for good)."""

    def __init__(self, monkeypatch):
        self.at: set[tuple[str, int]] = set()
        emit = CallPlan.emit

        def noted(plan, inp, pos, most=1):
            n = len(inp.events)
            end, read = emit(plan, inp, pos, most)
            self.at.update((inp.text, ev[1]) for ev in inp.events[n:] if ev[0] == "whole_call")
            return end, read
        monkeypatch.setattr(plan_module.CallPlan, "emit", noted)


def test_plans_read_every_canonical_call_as_the_general_parser_does(corpus_entry, analyzed, fixed_points,
                                                                      monkeypatch):
    outputs = call_outputs(corpus_entry, analyzed, fixed_points)
    if not outputs or not _has_plan(outputs[0].parser):
        pytest.skip("no calls read by a plan")
    reads = _Reads(monkeypatch)
    for out in outputs:
        got = out.parser.parse(out.text)
        assert got == out.parser.stream().whole(out.text, plans=False)
        read = sum(1 for text, _ in reads.at if text == out.text)
        assert read == len(got["tool_calls"]), f"the plan missed a canonical call: {out.text!r}"
    for out in outputs:  # and the forms models write otherwise: the plan gives way, nothing changes
        for dev in deviations(out):
            assert out.parser.parse(dev.text) == out.parser.stream().whole(dev.text, plans=False), \
                f"{dev.perturbation}: {dev.text!r}"
