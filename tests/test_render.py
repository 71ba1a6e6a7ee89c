"""Renderer tests: HF-faithful behaviour on both engines, the sandbox, and the limits.

Timing assertions only detect hangs (generous bounds); they never measure speed.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from chat_autoparser.errors import RenderError, RenderLimitError, TemplateError, TemplateRaised
from chat_autoparser.analyzer.load import LoadedTemplate, from_string
from chat_autoparser.analyzer.render import (ENGINES, RenderLimits, compile_error, hf_tojson, make_renderer,
                             plain_data, prepare_messages)

PINNED = datetime(2024, 2, 29, 13, 5, 9)
HANG = 10.0  # seconds: anything slower than this is a hang, not a slow machine
NEVER_ENDS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
# jinja2 stops NEVER_ENDS by its loop budget within milliseconds; tests of the watchdog lift it
NO_LOOP_BUDGET = 10**15

both = pytest.mark.parametrize("engine", ENGINES)


def render(src: str, engine: str = "jinja2", messages: Any = (), *, name: str = "t.jinja",
           special_tokens: dict[str, Any] | None = None, limits: RenderLimits | None = None,
           sandbox: str = "immutable", **kwargs: Any) -> str:
    t = from_string(src, name=name, special_tokens=special_tokens)
    extra: dict[str, Any] = {"now": lambda: PINNED}
    if limits is not None:
        extra["limits"] = limits
    if sandbox != "immutable":
        extra["sandbox"] = sandbox
    return make_renderer(t, engine, **extra).render(list(messages), **kwargs)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# --------------------------------------------------------------------------- whitespace control

@both
def test_trim_and_lstrip_blocks(engine: str) -> None:
    src = ("{% for m in messages %}\n"
           "    {% if m.role == 'user' %}\n"
           "U:{{ m.content }}\n"
           "    {% else %}\n"
           "A:{{ m.content }}\n"
           "    {% endif %}\n"
           "{% endfor %}\n")
    msgs = [user("hi"), {"role": "assistant", "content": "yo"}]
    assert render(src, engine, msgs) == "U:hi\nA:yo\n"


@both
def test_trim_blocks_leaves_expressions_alone(engine: str) -> None:
    # trim_blocks removes the newline after a *block* tag, not after {{ ... }}.
    assert render("{{ 'a' }}\nb", engine) == "a\nb"
    assert render("{% if true %}\nx\n{% endif %}\ny", engine) == "x\ny"
    assert render("{% if true %}x{% endif %}\ny", engine) == "xy"  # ... including after end tags


@both
def test_lstrip_blocks_plus_modifier_and_explicit_trims(engine: str) -> None:
    assert render("  {%+ if true %}x{% endif %}", engine) == "  x"
    assert render("  {% if true %}x{% endif %}", engine) == "x"
    assert render("a  \n  {{- 'b' -}}  \n c", engine) == "abc"


@both
def test_single_trailing_newline_dropped(engine: str) -> None:
    # keep_trailing_newline=False, as transformers.
    assert render("abc\n", engine) == "abc"
    assert render("abc\n\n", engine) == "abc\n"


# --------------------------------------------------------------------------- loop controls

@both
def test_loop_controls(engine: str) -> None:
    src = ("{% for i in range(10) %}"
           "{% if i % 2 == 0 %}{% continue %}{% endif %}"
           "{% if i > 6 %}{% break %}{% endif %}"
           "{{ i }}"
           "{% endfor %}")
    assert render(src, engine) == "135"


@both
def test_loop_variables(engine: str) -> None:
    src = ("{% for m in messages %}{{ loop.index0 }}{% if loop.first %}F{% endif %}"
           "{% if loop.last %}L{% endif %}{% endfor %}")
    assert render(src, engine, [user("a"), user("b"), user("c")]) == "0F12L"


# --------------------------------------------------------------------------- tojson

@both
def test_tojson_no_html_escaping(engine: str) -> None:
    out = render("{{ messages[0].content | tojson }}", engine, [user("<tool> & 'q' \"d\"")])
    assert out == "\"<tool> & 'q' \\\"d\\\"\""
    assert "\\u003c" not in out and "&lt;" not in out


@both
def test_tojson_ensure_ascii_false_by_default(engine: str) -> None:
    assert render("{{ messages[0].content | tojson }}", engine, [user("café 日本 🙂")]) == '"café 日本 🙂"'
    assert render("{{ 'é' | tojson(ensure_ascii=true) }}", engine) == '"\\u00e9"'


@both
def test_tojson_keys_in_input_order(engine: str) -> None:
    tools = [{"name": "f", "b": 1, "a": 2}]
    assert render("{{ tools[0] | tojson }}", engine, tools=tools) == '{"name": "f", "b": 1, "a": 2}'


@both
def test_tojson_arguments(engine: str) -> None:
    data = {"b": 1, "a": [1, 2]}
    kw = {"tools": [data]}
    assert render("{{ tools[0] | tojson(indent=2) }}", engine, **kw) == json.dumps(data, indent=2)
    assert render("{{ tools[0] | tojson(sort_keys=true) }}", engine, **kw) == '{"a": [1, 2], "b": 1}'
    assert render("{{ tools[0] | tojson(separators=(',', ':')) }}", engine, **kw) == '{"b":1,"a":[1,2]}'
    assert render("{{ tools[0] | tojson(indent=4, separators=(',', ': '), sort_keys=true) }}", engine,
                  **kw) == json.dumps(data, indent=4, separators=(",", ": "), sort_keys=True)


def test_tojson_of_reused_tools_is_the_same_text_for_each_call() -> None:
    # a renderer told the tools are reused keeps their JSON texts: per value and arguments
    src = ("{{ tools[0] | tojson }}|{{ tools[0] | tojson(indent=2) }}|{{ tools | tojson }}|"
           "{{ tools[0] | tojson(separators=(',', ':')) }}|{{ tools[0] | tojson(indent=true) }}|"
           "{{ tools[0] | tojson(sort_keys=true) }}|{{ tools[0].p | tojson }}")
    tools = [{"name": "f", "b": 1, "a": [1, "é"], "p": {"y": None}}]
    expected = make_renderer(from_string(src), "jinja2").render([], tools=tools)
    reused = make_renderer(from_string(src), "jinja2", reuse_tools=True)
    assert [reused.render([], tools=tools) for _ in range(3)] == [expected] * 3
    assert expected.split("|")[1] == json.dumps(tools[0], indent=2, ensure_ascii=False)


def test_hf_tojson_function() -> None:
    assert hf_tojson({"x": "<&>'"}) == '{"x": "<&>\'"}'
    assert hf_tojson("ü") == '"ü"'
    assert hf_tojson({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'
    assert hf_tojson([1, 2], indent=1) == "[\n 1,\n 2\n]"


# --------------------------------------------------------------------------- raise_exception

def test_raise_exception_jinja2_names_template_and_line() -> None:
    src = "{% for m in messages %}\n{% if m.role == 'system' %}\n{{ raise_exception('no system role') }}\n{% endif %}{% endfor %}"
    with pytest.raises(TemplateRaised) as ei:
        render(src, "jinja2", [{"role": "system", "content": "s"}], name="mytemplate.jinja")
    err = ei.value
    assert isinstance(err, RenderError)
    assert err.reason == "no system role"
    assert err.template == "mytemplate.jinja"
    assert err.line == 3
    assert str(err).startswith("mytemplate.jinja:3")


def test_raise_exception_minijinja_names_template() -> None:
    with pytest.raises(TemplateRaised) as ei:
        render("a\n{{ raise_exception('Roles must alternate') }}", "minijinja", name="mytemplate.jinja")
    assert ei.value.reason == "Roles must alternate"
    assert ei.value.template == "mytemplate.jinja"
    assert "mytemplate.jinja" in str(ei.value)


def test_template_raised_with_probe() -> None:
    with pytest.raises(TemplateRaised) as ei:
        render("{{ raise_exception('x') }}", name="n")
    e2 = ei.value.with_probe("tool_call")
    assert isinstance(e2, TemplateRaised)
    assert "tool_call" in str(e2) and e2.template == "n"


# --------------------------------------------------------------------------- strftime_now

@both
def test_strftime_now_pinned(engine: str) -> None:
    assert render("{{ strftime_now('%d %b %Y %H:%M:%S') }}", engine) == "29 Feb 2024 13:05:09"


@both
def test_strftime_now_unpinned_is_today(engine: str) -> None:
    r = make_renderer(from_string("{{ strftime_now('%Y') }}"), engine)
    assert r.render([]) in {str(datetime.now().year - 1), str(datetime.now().year)}


# --------------------------------------------------------------------------- message preprocessing

@both
def test_none_valued_keys_dropped(engine: str) -> None:
    src = ("{% for m in messages %}{{ m.role }}:"
           "{% if m.content is defined %}content{% else %}no-content{% endif %},"
           "{% if 'tool_calls' in m %}calls{% else %}no-calls{% endif %};{% endfor %}")
    msgs = [{"role": "assistant", "content": None, "tool_calls": None},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function"}]}]
    assert render(src, engine, msgs) == "assistant:no-content,no-calls;assistant:content,calls;"


@both
def test_reasoning_aliasing(engine: str) -> None:
    src = ("{% for m in messages %}[{{ m.reasoning_content }}|{{ m.thinking }}|{{ m.content }}]"
           "{% endfor %}")
    msgs = [{"role": "assistant", "reasoning": "R1", "content": "c1"},
            {"role": "assistant", "thinking": "R2", "content": "c2"},
            {"role": "assistant", "reasoning_content": "R3", "content": "c3"}]
    assert render(src, engine, msgs) == "[R1|R1|c1][R2|R2|c2][R3|R3|c3]"


def test_prepare_messages_aliasing_and_no_mutation() -> None:
    msg = {"role": "assistant", "reasoning": "why", "content": "ok", "name": None}
    out = prepare_messages([msg])
    assert out == [{"role": "assistant", "reasoning": "why", "content": "ok",
                    "reasoning_content": "why", "thinking": "why"}]
    assert msg == {"role": "assistant", "reasoning": "why", "content": "ok", "name": None}
    # No reasoning at all: no alias keys invented.
    assert prepare_messages([user("x")]) == [user("x")]
    with pytest.raises(RenderError):
        prepare_messages(["not a message"])  # type: ignore[list-item]


def test_plain_data() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: list[int]

    class Odd:
        pass

    class MyStr(str):
        pass

    out = plain_data({"p": Point(1, [2]), "o": Odd(), "s": MyStr("v"), "t": (1, None), "f": 1.5, "b": True})
    assert out == {"p": {"x": 1, "y": [2]}, "o": "<Odd>", "s": "v", "t": (1, None), "f": 1.5, "b": True}
    assert type(out["s"]) is str


# --------------------------------------------------------------------------- {% generation %}

def test_generation_tag_renders_body() -> None:
    src = ("{% for m in messages %}{% if m.role == 'assistant' %}"
           "{% generation %}{{ m.content }}<eot>{% endgeneration %}"
           "{% else %}{{ m.content }}{% endif %}{% endfor %}")
    assert render(src, "jinja2", [user("q"), {"role": "assistant", "content": "a"}]) == "qa<eot>"


def test_generation_tag_with_block_whitespace() -> None:
    src = "{% generation %}\n  body\n{% endgeneration %}\nafter"
    assert render(src, "jinja2") == "  body\nafter"


# --------------------------------------------------------------------------- context

@both
def test_tools_documents_generation_prompt_and_kwargs(engine: str) -> None:
    src = ("{{ tools | tojson }}|{{ documents | tojson }}|"
           "{% if add_generation_prompt %}GP{% endif %}|"
           "{% if enable_thinking %}T{% else %}noT{% endif %}|{{ reasoning_effort }}|{{ custom | tojson }}")
    out = render(src, engine, [user("x")],
                 tools=[{"type": "function", "function": {"name": "f"}}],
                 documents=[{"title": "d", "text": "t"}], add_generation_prompt=True,
                 enable_thinking=False, reasoning_effort="high", custom={"k": [1, None]})
    assert out == ('[{"type": "function", "function": {"name": "f"}}]|[{"title": "d", "text": "t"}]|'
                   'GP|noT|high|{"k": [1, null]}')


@both
def test_defaults_when_not_given(engine: str) -> None:
    src = ("{% if tools is none %}no-tools{% endif %}|{% if documents is none %}no-docs{% endif %}|"
           "{% if add_generation_prompt %}GP{% else %}noGP{% endif %}|"
           "{% if enable_thinking is defined %}def{% else %}undef{% endif %}")
    assert render(src, engine, [user("x")]) == "no-tools|no-docs|noGP|undef"


@both
def test_special_tokens_from_loaded_template(engine: str) -> None:
    tokens = {"bos_token": "<|begin|>", "eos_token": "<|end|>", "pad_token": "<pad>",
              "additional_special_tokens": ["<a>", "<b>"]}
    src = ("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ pad_token }}"
           "{% if additional_special_tokens is defined %}extra{% endif %}")
    # As transformers 5: the named tokens (special_tokens_map) only, not the extra list.
    assert render(src, engine, [user("x")], special_tokens=tokens) == "<|begin|>x<|end|><pad>"
    # Bare template: stand-ins.
    assert render("{{ bos_token }}{{ eos_token }}", engine) == "<s></s>"
    # Caller kwargs win over the tokenizer's, as in transformers.
    assert render("{{ bos_token }}", engine, special_tokens=tokens, bos_token="[B]") == "[B]"


@both
def test_tool_use_variant_selected_by_tools(engine: str) -> None:
    t = LoadedTemplate(variants={"default": "D", "tool_use": "T{{ tools | length }}"}, name="multi",
                       special_tokens={})
    r = make_renderer(t, engine)
    assert r.render([user("x")]) == "D"
    assert r.render([user("x")], tools=[{"name": "f"}]) == "T1"
    assert r.render([user("x")], tools=[]) == "T0"  # tools given, even empty


def test_unknown_engine() -> None:
    with pytest.raises(ValueError):
        make_renderer(from_string("x"), "mako")


# --------------------------------------------------------------------------- sandbox

APPEND = "{% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.append(2) %}{{ l }}"


def test_immutable_sandbox_refuses_list_append() -> None:
    with pytest.raises(RenderError) as ei:
        render(APPEND, "jinja2", name="kimi.jinja")
    assert not isinstance(ei.value, RenderLimitError)
    assert "sandbox" in str(ei.value)
    assert "append" in str(ei.value)
    assert ei.value.template == "kimi.jinja"


def test_immutable_sandbox_refuses_dict_update() -> None:
    with pytest.raises(RenderError) as ei:
        render("{% set d = {} %}{% set _ = d.update({'a': 1}) %}{{ d }}", "jinja2")
    assert "sandbox" in str(ei.value)


def test_relaxed_sandbox_allows_list_append() -> None:
    assert render(APPEND, "jinja2", sandbox="relaxed") == "[1, 2]"
    r = make_renderer(from_string(APPEND), "jinja2", sandbox="relaxed")
    assert r.engine == "jinja2-relaxed"
    assert make_renderer(from_string(APPEND), "jinja2").engine == "jinja2"


@pytest.mark.parametrize("expr", ["m.role", "m.missing is defined", "m.items()|list", "m.get('role')",
                                  "m.pop is defined", "m['pop']", "m.keys is defined", "m.__class__ is defined",
                                  "m.__len__ is defined", "n.role is defined"])
def test_dict_attributes_read_as_jinja2s_sandbox_reads_them(expr: str) -> None:
    import jinja2.sandbox
    m = {"role": "user", "items": "an item", "pop": "a key named pop", "__class__": "x"}
    src = "{{ " + expr + " }}"
    theirs = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(src).render(m=m, n=None)
    assert render(src, m=m, n=None) == theirs


@pytest.mark.parametrize("sandbox", ["immutable", "relaxed"])
def test_sandbox_blocks_dunder_access(sandbox: str) -> None:
    with pytest.raises(RenderError) as ei:
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}", "jinja2", sandbox=sandbox)
    assert "__class__" in str(ei.value)


@pytest.mark.parametrize("src", ["{% set ns = namespace(_x=1) %}{{ ns.a }}",
                                 "{% set ns = namespace(a=1) %}{% set ns._hidden = 2 %}ok"])
def test_namespace_refuses_underscore_attributes(src: str) -> None:
    with pytest.raises(RenderError) as ei:
        render(src, "jinja2")
    assert "underscore" in str(ei.value)


@both
def test_namespace_works(engine: str) -> None:
    src = ("{% set ns = namespace(last=None, n=0) %}{% for m in messages %}"
           "{% set ns.n = ns.n + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.n }}{{ ns.last }}")
    assert render(src, engine, [user("a"), {"role": "assistant", "content": "b"}]) == "2assistant"


# --------------------------------------------------------------------------- syntax errors

@both
@pytest.mark.parametrize("src,line", [("a\n{% if %}", 2), ("a\nb\n{% for x in y %}\nc", 4),
                                      ("{{ 1 + }}", 1), ("x\n\n{% endif %}", 3)])
def test_syntax_error_names_line(engine: str, src: str, line: int) -> None:
    t = from_string(src, name="broken.jinja")
    r = make_renderer(t, engine)
    with pytest.raises(TemplateError) as ei:
        r.render([user("x")])
    err = ei.value
    assert err.template == "broken.jinja"
    assert err.line is not None and abs(err.line - line) <= 1
    assert str(err).startswith(f"broken.jinja:{err.line}: ")
    with pytest.raises(TemplateError):
        r.compile()  # type: ignore[attr-defined]
    ce = compile_error(src, "broken.jinja", engine)
    assert isinstance(ce, TemplateError) and ce.line == err.line


@both
def test_compile_ok(engine: str) -> None:
    assert compile_error("{{ 1 }}", "ok", engine) is None
    make_renderer(from_string("{{ 1 }}"), engine).compile()  # type: ignore[attr-defined]


DEPENDENCY_TEMPLATES = [
    (Path(__file__).resolve().parents[1] / "templates" / "chatml-think.jinja").read_text(),
    "{% macro m(x) %}{{ x | trim | upper }}{% if x is string %}s{% endif %}{% endmacro %}"
    "{% for msg in messages | selectattr('role', 'equalto', 'user') %}{{ m(msg.content) }}"
    "{{ msg.content | length if msg.content is defined else 0 }}{% endfor %}"
    "{% filter lower %}{{ 'A' | replace('A', 'B') }}{% endfilter %}",
    "{% block b %}{{ x | lower }}{% if x is number %}n{% endif %}{% endblock %}{{ y | default('') | tojson }}",
    "{% set ns = namespace(a=[1] | list) %}{% for i in ns.a recursive %}{{ i | string }}{{ loop(i | list if i is"
    " iterable else []) }}{% endfor %}{% if y is not none and y is mapping %}{{ y | dictsort | first }}{% endif %}",
]


SEARCH_TEMPLATES = [
    "{% for m in messages %}{% for c in m.content %}{% for k in c %}{{ loop.index }}{{ k }}{% endfor %}"
    "{{ loop.last }}{% endfor %}{% endfor %}",
    "{% for i in x %}{% block b scoped %}{{ i }}{{ loop.index }}{% endblock %}{% endfor %}",
    "{% extends 'base.jinja' %}{% block a %}{% for i in x %}{{ i }}{% endfor %}{% endblock %}",
]


@pytest.mark.parametrize("src", DEPENDENCY_TEMPLATES + SEARCH_TEMPLATES)
def test_code_is_the_code_of_jinja2s_own_walks(src: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the code generator finds the filters and tests a frame uses in one walk (which also sees
    # whether the template has blocks, extends or imports); in a template without those, the
    # searches jinja2 makes for them end at once. The code is the code of jinja2's own walks,
    # and the AST (shared, cached) is left as it was.
    from jinja2 import nodes
    from jinja2.compiler import CodeGenerator

    import chat_autoparser.analyzer.codegen as codegen_module
    from chat_autoparser.analyzer.codegen import GuardedCodeGenerator
    from chat_autoparser.analyzer.render import _environment

    env = _environment("immutable")
    ast = env.parse(src)
    before = repr(ast)
    ours = env.compile(ast, raw=True)
    assert all("find_all" not in vars(n) for n in [ast, *ast.find_all(nodes.Node)])
    assert repr(ast) == before
    if src in DEPENDENCY_TEMPLATES:
        assert "= environment.filters[" in ours and "= environment.tests[" in ours  # (the case is tested)

    class Stock(GuardedCodeGenerator):
        pull_dependencies = CodeGenerator.pull_dependencies

    monkeypatch.setattr(env, "code_generator_class", Stock)
    monkeypatch.setattr(codegen_module, "_searched_at_once", lambda node: None)
    assert env.compile(ast, raw=True) == ours


@pytest.mark.parametrize("src, line", [
    ("a\n{{ messages[0].content.nosuchmethod() }}", 2),
    ("a\n{% if x %}\n{{ y | nosuch }}{% endif %}", 3),     # jinja2's stand-in for the filter
    ("a\n\n{% if x is nosuch %}{% endif %}", 3),            # raises, not the template line
    ("a\n{% block b %}\n\n{% if x is nosuch %}{% endif %}{% endblock %}", 4),
    ("{% macro m() %}\n{{ raise_exception('no') }}{% endmacro %}\n{{ m() }}", 2),
])
def test_a_render_error_names_the_template_line(src: str, line: int) -> None:
    with pytest.raises(RenderError) as ei:
        render(src, "jinja2", [user("x")], x=1)
    assert ei.value.line == line


def test_jinja2_syntax_error_exact_line() -> None:
    with pytest.raises(TemplateError) as ei:
        render("line1\nline2\n{% if x %}{{ y }\nline4", "jinja2")
    assert ei.value.line == 3


@both
def test_runtime_error_is_render_error(engine: str) -> None:
    with pytest.raises(RenderError) as ei:
        render("{{ messages[0].content.nosuchmethod() }}", engine, [user("x")], name="rt.jinja")
    assert not isinstance(ei.value, (TemplateRaised, RenderLimitError))
    assert ei.value.template == "rt.jinja"


# --------------------------------------------------------------------------- limits

@both
def test_endless_loop_stops(engine: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        render(NEVER_ENDS, engine, limits=RenderLimits(timeout_s=0.5), name="loop.jinja")
    assert time.monotonic() - t0 < HANG
    assert ei.value.template == "loop.jinja"
    if engine == "minijinja":
        assert "fuel" in str(ei.value)
    else:
        assert "max_iterations" in str(ei.value) and ei.value.line == 1


def test_endless_loop_stops_on_time_without_loop_budget() -> None:
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        render(NEVER_ENDS, limits=RenderLimits(timeout_s=0.5, max_iterations=NO_LOOP_BUDGET), name="loop.jinja")
    assert time.monotonic() - t0 < HANG
    assert "0.5 s" in str(ei.value)


def test_loop_budget_counts_every_loop_and_recursive_step() -> None:
    limits = RenderLimits(max_iterations=10)
    assert render("{% for i in range(10) %}{{ i }}{% endfor %}", limits=limits) == "0123456789"
    for src in ("{% for i in range(11) %}{% endfor %}",
                "{% for i in range(4) %}{% for j in range(4) %}{% endfor %}{% endfor %}",
                "{% for i in 'abcdefghijk'|list|select %}{% endfor %}",
                "{% for x in [[[[[[[[[[[1]]]]]]]]]]] recursive %}{{ loop(x) if x is iterable }}{% endfor %}"):
        with pytest.raises(RenderLimitError) as ei:
            render(src, limits=limits)
        assert "max_iterations" in str(ei.value), src


def test_minijinja_timeout_when_fuel_is_unlimited() -> None:
    # With fuel out of the way, the watchdog still stops a render that calls back into Python.
    src = ("{% for i in range(100000) %}{% for j in range(100000) %}{{ strftime_now('%Y') }}"
           "{% endfor %}{% endfor %}")
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        render(src, "minijinja", limits=RenderLimits(timeout_s=0.5, fuel=10**15, max_output_chars=10**15))
    assert time.monotonic() - t0 < HANG
    assert "0.5 s" in str(ei.value)


@both
def test_huge_repetition_stops(engine: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError):
        render("{{ 'x' * 10**8 }}", engine)
    assert time.monotonic() - t0 < HANG


def test_huge_repetition_refused_before_allocation_jinja2() -> None:
    for src in ("{{ 'ab' * 10**7 }}", "{{ 10**7 * 'ab' }}", "{{ ([0] * 10**7) | length }}"):
        with pytest.raises(RenderLimitError) as ei:
            render(src, "jinja2")
        assert "over the limit" in str(ei.value)
    # Ordinary repetition is plain Python.
    assert render("{{ '=' * 3 }}{{ [1] * 2 }}{{ 2 * 3 }}", "jinja2") == "===[1, 1]6"


@both
def test_loop_printing_a_lot_stops(engine: str) -> None:
    src = "{% for i in range(40000) %}{{ 'x' * 100 }}{% endfor %}"  # 4 million characters
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        render(src, engine)
    assert time.monotonic() - t0 < HANG
    assert "output" in str(ei.value)


@both
def test_small_output_limit(engine: str) -> None:
    limits = RenderLimits(max_output_chars=1000)
    assert len(render("{% for i in range(100) %}0123456789{% endfor %}", engine, limits=limits)) == 1000
    with pytest.raises(RenderLimitError):
        render("{% for i in range(101) %}0123456789{% endfor %}", engine, limits=limits)


def test_self_recursive_macro_stops_jinja2() -> None:
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "jinja2", name="rec.jinja")
    assert time.monotonic() - t0 < HANG
    assert ei.value.template == "rec.jinja"
    assert "recursion" in str(ei.value)


def test_self_recursive_macro_stops_minijinja() -> None:
    # minijinja has its own recursion limit; it reports a RenderError (not a hang).
    with pytest.raises(RenderError):
        render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "minijinja")


def test_huge_power_stops_jinja2() -> None:
    with pytest.raises(RenderLimitError) as ei:
        render("a\n{{ 9 ** (9 ** 9) }}", "jinja2")
    assert ei.value.line == 2
    with pytest.raises(RenderLimitError):
        render("{{ 2 ** 100000 }}", "jinja2")


def test_power_is_left_associative_in_jinja2() -> None:
    # Jinja parses `9 ** 9 ** 9` as `(9 ** 9) ** 9` (a 78-digit number), as transformers renders it.
    assert render("{{ 9 ** 9 ** 9 }}", "jinja2") == str((9 ** 9) ** 9)
    assert render("{{ 2 ** 10 }}|{{ (-3) ** 3 }}|{{ 2 ** -1 }}", "jinja2") == "1024|-27|0.5"


def test_huge_power_stops_minijinja() -> None:
    with pytest.raises(RenderError):
        render("{{ 9 ** (9 ** 9) }}", "minijinja")


@both
def test_same_thread_renders_normally_after_timeout(engine: str) -> None:
    limits = RenderLimits(timeout_s=0.3, max_iterations=NO_LOOP_BUDGET)
    ok = make_renderer(from_string("{% for m in messages %}{{ m.content }}{% endfor %}"), engine)
    for _ in range(3):
        with pytest.raises(RenderLimitError):
            render(NEVER_ENDS, engine, limits=limits)
        assert ok.render([user("a"), user("b")]) == "ab"
        # No interrupt may be left pending for this thread: plain Python keeps running.
        total = 0
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            total += sum(range(1000))
        assert total > 0
        assert ok.render([user("c")]) == "c"


def test_quick_renders_are_never_interrupted() -> None:
    # Many renders each well under a short limit: none may be hit by a stale interrupt.
    r = make_renderer(from_string("{% for i in range(50) %}{{ i }}{% endfor %}"), "jinja2",
                      limits=RenderLimits(timeout_s=0.25))
    expected = "".join(str(i) for i in range(50))
    # (a full collection of a large test process' heap once took a render past the limit: no
    # collection while renders run, so that only an interrupt can)
    gc.collect()
    gc.disable()
    try:
        t_end = time.monotonic() + 0.5
        n = 0
        while time.monotonic() < t_end:
            assert r.render([]) == expected
            n += 1
    finally:
        gc.enable()
    assert n > 10


@pytest.mark.parametrize("engine", ["jinja2", "jinja2-mixed"])
def test_concurrent_renders_respect_own_timeouts(engine: str) -> None:
    timeouts = [0.2, 0.4, 0.6, 0.8]
    results: dict[int, tuple[str, float, str]] = {}
    ok_counts: dict[int, int] = {}

    def endless(i: int) -> None:
        t = from_string(NEVER_ENDS, name=f"loop{i}")
        r = make_renderer(t, "jinja2", limits=RenderLimits(timeout_s=timeouts[i], max_iterations=NO_LOOP_BUDGET))
        t0 = time.monotonic()
        try:
            r.render([])
            results[i] = ("finished", time.monotonic() - t0, "")
        except RenderLimitError as e:
            results[i] = ("limit", time.monotonic() - t0, str(e))
        except BaseException as e:  # pragma: no cover - reported below
            results[i] = (type(e).__name__, time.monotonic() - t0, str(e))

    def quick(i: int) -> None:
        # Normal renders alongside the endless ones must never be interrupted.
        r = make_renderer(from_string("{{ messages[0].content }}"), "jinja2",
                          limits=RenderLimits(timeout_s=5))
        n = 0
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:
            assert r.render([user("q")]) == "q"
            n += 1
        ok_counts[i] = n

    threads = [threading.Thread(target=endless, args=(i,)) for i in range(4)]
    if engine == "jinja2-mixed":
        threads += [threading.Thread(target=quick, args=(i,)) for i in range(2)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(HANG)
    assert not any(th.is_alive() for th in threads), "a render hung"
    assert time.monotonic() - t0 < HANG
    for i, timeout in enumerate(timeouts):
        kind, elapsed, msg = results[i]
        assert kind == "limit", (i, kind, msg)
        assert f"loop{i}" in msg and f"{timeout:g} s" in msg
        assert elapsed >= timeout * 0.9  # each waited for its own limit, not a neighbour's
    if engine == "jinja2-mixed":
        assert len(ok_counts) == 2 and all(n > 0 for n in ok_counts.values())


def test_concurrent_minijinja_fuel() -> None:
    errors: list[BaseException | None] = [None] * 4

    def work(i: int) -> None:
        try:
            render(NEVER_ENDS, "minijinja", limits=RenderLimits(fuel=100_000 * (i + 1)))
        except BaseException as e:
            errors[i] = e

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(HANG)
    assert not any(th.is_alive() for th in threads)
    for i, e in enumerate(errors):
        assert isinstance(e, RenderLimitError), e
        assert str(100_000 * (i + 1)) in str(e)


def test_minijinja_worker_interrupted_mid_request_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A render interrupted while its reply is on its way (KeyboardInterrupt, an error in the
    caller) must not leave that reply for the next render to read."""
    import chat_autoparser.analyzer.minijinja_engine as mj

    class Interrupt(BaseException):
        pass

    renderer = make_renderer(from_string("{{ messages[0].content }}"), "minijinja")
    assert renderer.render([user("warm")]) == "warm"  # the pool holds a started worker
    real_read = mj._Worker._read
    armed = [True]

    def read_once_interrupted(self: Any, n: int, deadline: float) -> bytes:
        if armed[0]:
            armed[0] = False
            raise Interrupt()
        return real_read(self, n, deadline)

    monkeypatch.setattr(mj._Worker, "_read", read_once_interrupted)
    with pytest.raises(Interrupt):
        renderer.render([user("first")])
    assert renderer.render([user("second")]) == "second"


def test_minijinja_worker_started_by_a_thread_outlives_it() -> None:
    """The pool hands a worker to any thread: the worker must not die with the thread that
    started it (PR_SET_PDEATHSIG fires when that thread ends, not the process)."""
    import chat_autoparser.analyzer.minijinja_engine as mj

    renderer = make_renderer(from_string("{{ messages[0].content }}"), "minijinja")
    memory_mb = RenderLimits().worker_memory_mb
    started, finish = threading.Event(), threading.Event()

    def start_one() -> None:
        mj._POOL.release(mj._Worker(memory_mb))  # started by this thread, idle in the pool
        started.set()
        finish.wait()

    t = threading.Thread(target=start_one)
    t.start()
    started.wait()
    worker = mj._POOL.acquire(memory_mb)  # handed out while its thread lives
    finish.set()
    t.join()
    time.sleep(0.2)
    try:
        assert worker.alive()
    finally:
        mj._POOL.release(worker)
    assert renderer.render([user("after")]) == "after"


def test_an_interrupt_swallowed_is_sent_again():
    """Python ignores an exception raised in a gc callback or a ``__del__``: the watchdog's
    interrupt can land there (seen: hypothesis' gc callback). It is sent again until taken."""
    from chat_autoparser.analyzer.watchdog import Interrupted, TimedOut, run_with_deadline
    swallowed: list[int] = []

    def spin() -> None:
        t = time.monotonic()
        while time.monotonic() - t < 5:
            try:
                while time.monotonic() - t < 5:
                    pass
            except Interrupted:
                if len(swallowed) == 3:
                    raise
                swallowed.append(1)  # (as a gc callback would)

    t0 = time.monotonic()
    with pytest.raises(TimedOut):
        run_with_deadline(spin, 0.05)
    # sent again soon, then less often: 0.05 s + 0.01 + 0.02 + 0.04 (at a fixed 0.25 s between
    # sends, three swallowed would take 0.8 s)
    assert len(swallowed) == 3 and time.monotonic() - t0 < 0.5
