"""Work done once: probe renders shared between inputs a template sees alike, and whole analyses
kept by content (in memory, and on disk under ``AUTOPARSER_CACHE``).

No timings here: speed is measured by ``benchmarks/analysis_speed.py``.
"""

from __future__ import annotations

import pytest

from analyzer.load import from_string
from analyzer.prober import Prober
from analyzer.template_info import template_info

USER = [{"role": "user", "content": "hi"}]
PLAIN = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"


# --------------------------------------------------------------------------- shared renders

def test_inputs_are_every_name_loaded() -> None:
    info = template_info("{% set x = 1 %}{{ x }}{% if flag %}{{ y | default('') }}{% endif %}{% set ns.a = 2 %}")
    assert info.inputs == frozenset({"x", "flag", "y", "ns"})


@pytest.mark.parametrize("src", ["{{ debug() }}", "{% include 'x' %}", "{% extends 'base' %}",
                                 "{% import 'm' as m %}"])
def test_inputs_unknown_when_the_context_escapes(src: str) -> None:
    assert template_info(src).inputs is None


def test_unread_kwargs_and_generation_prompt_share_one_render() -> None:
    prober = Prober(from_string(PLAIN))
    first = prober.render("a", USER, enable_thinking=True)
    assert prober.render("b", USER, enable_thinking=False) == first
    assert prober.render("c", USER, add_generation_prompt=True, reasoning_effort="low") == first
    assert prober.render("d", USER, tools=[{"type": "function", "function": {"name": "f"}}]) == first
    assert prober.renders == 1


def test_names_the_template_reads_are_rendered() -> None:
    prober = Prober(from_string(PLAIN + "{% if add_generation_prompt %}<{{ enable_thinking }}>{% endif %}"))
    outs = {prober.render(f"p{i}", USER, add_generation_prompt=agp, enable_thinking=on)
            for i, (agp, on) in enumerate([(False, True), (True, True), (True, False), (False, False)])}
    assert outs == {"[user]hi", "[user]hi<True>", "[user]hi<False>"}
    assert prober.renders == 4  # read anywhere is read: no render is shared


def test_no_sharing_when_any_variable_may_be_read() -> None:
    prober = Prober(from_string(PLAIN + "{% import 'x' as x %}"))
    prober.render("a", USER, enable_thinking=True)
    prober.render("b", USER, enable_thinking=False)
    assert prober.renders == 2


def test_a_shared_render_records_failures_and_fallbacks_per_probe() -> None:
    # the reference sandbox refuses list.append: each probe is recorded as rendered by the fallback
    prober = Prober(from_string("{% set xs = [] %}{{ xs.append(1) }}" + PLAIN))
    assert prober.render("a", USER, enable_thinking=True) == prober.render("b", USER, enable_thinking=False)
    assert prober.renders == 1
    assert sorted(prober.fallback_used) == ["a", "b"]
    failing = Prober(from_string("{{ raise_exception('no') }}"))
    failing.render("a", USER, enable_thinking=True)
    failing.render("b", USER, enable_thinking=False)
    assert failing.renders == 1 and sorted(failing.failures) == ["a", "b"]
