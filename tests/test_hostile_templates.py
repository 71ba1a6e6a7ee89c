"""Hostile templates on both engines: every payload ends in a typed error, fast and small, and
leaves the process rendering and analysing normal templates exactly as before.

The payloads are the classes a security review tried: constant folding at compile time,
single large allocations (padding, widths, joins, replace, repetition, concatenation,
``tojson``), values that C code walks (a list sharing itself 64 levels deep is 2**64 items
when printed, compared or hashed), CPU loops, Python methods on inputs in minijinja, the
sandbox escapes that held already, and templates that break the compiler.

For each payload and engine the CI part checks:

* a typed error (under ``ChatAutoparserError``) saying which limit stopped it, or a harmless
  output where an engine has nothing to refuse (minijinja has no ``center`` filter);
* within 1 s: the default limits, except a 0.5 s render limit (``SUITE_LIMITS``) for what only
  wall time stops (minijinja's Rust loops; its worker is then killed);
* peak memory of this process growing under 200 MiB (a minijinja worker has its own cap,
  ``worker_memory_mb``, under that);
* afterwards: a plain render on the same engine, an uninterrupted Python loop, and a normal
  template's analysis equal to the one taken before any payload.

Payloads that would abort the whole process if the minijinja worker regressed run in a child
process. ``-m slow`` runs every payload with the default limits, and analyses it too.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from chat_autoparser.analyzer import analyze_template, from_string, render
from chat_autoparser.errors import ChatAutoparserError, RenderLimitError, TemplateError
from chat_autoparser.analyzer.limits import DEFAULT_LIMITS, RenderLimits
from chat_autoparser.analyzer.render import ENGINES, make_renderer

REPO = Path(__file__).resolve().parents[1]
SUITE_LIMITS = RenderLimits(timeout_s=0.5)
MEMORY_BUDGET = 200 * 1024 * 1024
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
NORMAL = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
          "{% if add_generation_prompt %}<|assistant|>{% endif %}")

DAG = "{% set ns = namespace(a=[1]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}"
DAG2 = ("{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}"
        "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}")
TDAG = "{% set ns = namespace(a=(1,)) %}{% for i in range(64) %}{% set ns.a = (ns.a, ns.a) %}{% endfor %}"
BIG = "{% set big = 'x' * 2000000 %}"


def doubling(start: str, op: str) -> str:
    return ("{% set ns = namespace(s=" + start + ") %}{% for i in range(64) %}{% set ns.s = " + op
            + " %}{% endfor %}{{ ns.s|length }}")


@dataclass(frozen=True)
class Payload:
    """A template and what each engine must answer: ``"Kind: text"`` (the error's class and a
    regular expression its message matches) or ``"ok"`` (renders harmlessly)."""

    name: str
    source: str
    jinja2: str
    minijinja: str
    child: bool = False  # would abort the process if the minijinja worker regressed

    def expected(self, engine: str) -> str:
        return self.jinja2 if engine == "jinja2" else self.minijinja


SIZE = "RenderLimitError: max_value_size"
NODES = "RenderLimitError: max_value_nodes"
MJ_ERROR = "RenderError: minijinja"  # minijinja has no such filter/method/operator
MJ_STOPPED = "RenderLimitError: render took over|out of fuel|worker died|out of memory|max_value"
MJ_FUEL = "RenderLimitError: out of fuel"
# fuel or the watchdog, whichever comes first on a loaded machine (CI saw the watchdog at 0.5 s)
MJ_FUEL_OR_TIME = "RenderLimitError: out of fuel|render took over"
READ_ONLY = "SecurityError: read-only"

PAYLOADS = [
    # jinja2 folded these while compiling, outside every limit (seconds, gigabytes)
    Payload("fold center", "{{ 'x'|center(1000000000) }}", SIZE, MJ_ERROR),
    Payload("fold printf", "{{ '%-1000000000s' % 'x' }}", SIZE, MJ_ERROR),
    Payload("fold format filter", "{{ '%1000000000s'|format('x') }}", SIZE, MJ_FUEL),
    Payload("fold wordwrap", "{{ 'ab cd '|center(2000000)|wordwrap(3) }}", SIZE, MJ_ERROR),
    Payload("fold autoescape", "{% autoescape 'x'|center(1000000000) %}x{% endautoescape %}", SIZE, MJ_ERROR),
    Payload("fold if", "{% if 'x'|center(1000000000) %}y{% endif %}", SIZE, MJ_ERROR),
    Payload("fold concat", "{{ 'x' ~ 'y'|center(1000000000) }}", SIZE, MJ_ERROR),
    # one large allocation, before any guard
    Payload("~ doubling", doubling("'xxxxxxxxxx'", "ns.s ~ ns.s"), SIZE, MJ_FUEL_OR_TIME),
    Payload("+ string doubling", doubling("'xxxxxxxxxx'", "ns.s + ns.s"), SIZE, MJ_FUEL),
    Payload("+ list doubling", doubling("[1]", "ns.s + ns.s"), SIZE, MJ_STOPPED),
    Payload("+ tuple doubling", doubling("(1,)", "ns.s + ns.s"), SIZE, MJ_STOPPED),
    Payload("* repeat", "{{ 'x' * 10**9 }}", SIZE, MJ_FUEL),
    Payload("* list repeat", "{{ ([0] * 10**9)|length }}", SIZE, "RenderError: too large"),
    Payload("** power", "{{ 9 ** (9 ** 9) }}", "RenderLimitError: max_int_bits", "RenderError: 9 \\*\\* 387420489"),
    Payload("indent width", "{{ 'x'|indent(1000000000, true) }}", SIZE, MJ_FUEL),
    Payload("indent lines", BIG.replace("'x'", "'\\n'") + "{{ big|indent(100) }}", SIZE, MJ_FUEL),
    Payload("str.format width", "{{ '{:>1000000000}'.format('x') }}", SIZE, MJ_STOPPED),
    Payload("str.format nested width", "{{ '{:{}}'.format('x', 1000000000) }}", SIZE, MJ_ERROR),
    Payload("str.format precision", "{{ '{:.1000000000f}'.format(1.5) }}", SIZE, MJ_STOPPED),
    Payload("str.format_map", "{{ '{a:>1000000000}'.format_map({'a': 'x'}) }}", SIZE, MJ_ERROR),
    Payload("printf star width", "{{ '%*s' % (1000000000, 'x') }}", SIZE, MJ_ERROR),
    Payload("printf precision", "{{ '%.1000000000f' % 1.5 }}", SIZE, MJ_ERROR),
    Payload("join separator", "{{ range(100)|join('x' * 1000000) }}", SIZE, MJ_STOPPED),
    Payload("str.join separator", "{{ ('x' * 1000000).join(['a'] * 100) }}", SIZE, MJ_STOPPED),
    Payload("replace empty", "{{ ('x' * 1000000)|replace('', 'yyyyyyyyyy') }}", SIZE,
            "RenderLimitError: output over|out of fuel"),
    Payload("str.replace empty", "{{ ('x' * 1000000).replace('', 'yyyyyyyyyy') }}", SIZE,
            "RenderLimitError: output over|out of fuel"),
    Payload("str.center", "{{ 'x'.center(1000000000) }}", SIZE, MJ_ERROR),
    Payload("str.ljust", "{{ 'x'.ljust(1000000000) }}", SIZE, MJ_ERROR),
    Payload("str.zfill", "{{ 'x'.zfill(1000000000) }}", SIZE, MJ_ERROR),
    Payload("str.expandtabs", "{{ ('\\t' * 1000000).expandtabs(1000) }}", SIZE, MJ_ERROR),
    Payload("str.translate", "{{ ('x' * 1000000).translate({120: 'y' * 1000}) }}", SIZE, MJ_ERROR),
    Payload("tojson indent", "{{ [1, [2]]|tojson(indent=300000000) }}", SIZE, SIZE),
    Payload("tojson separators", "{{ range(1000)|list|tojson(separators=('x' * 100000, ':')) }}", SIZE, SIZE),
    Payload("tojson big", BIG + "{{ [big, big]|tojson }}", SIZE, SIZE),
    Payload("print shared string", BIG + "{{ [big] * 1000 }}", SIZE, MJ_STOPPED),
    Payload("batch fill", "{{ [1]|batch(1000000000, 'x')|list|length }}", SIZE, MJ_FUEL),
    Payload("slice count", "{{ [1]|slice(1000000000)|list|length }}", SIZE, MJ_FUEL),
    Payload("sum of lists", "{{ ([[0] * 100000] * 100000)|sum(start=[])|length }}", SIZE, MJ_STOPPED),
    Payload("lipsum", "{{ lipsum(1000000000) }}", SIZE, MJ_ERROR),
    Payload("wordwrap work", "{% set big = 'a ' * 1000000 %}{{ big|wordwrap(1, wrapstring='x' * 1000) }}", SIZE,
            MJ_ERROR),
    Payload("output", "{% for i in range(40000) %}{{ 'x' * 100 }}{% endfor %}", "RenderLimitError: output over",
            "RenderLimitError: output over"),
    # values that C code walks: shared 64 levels deep, 2**64 items as a tree
    Payload("shared tojson", DAG + "{{ ns.a|tojson }}", NODES, MJ_STOPPED),
    Payload("shared string", DAG + "{{ ns.a|string|length }}", NODES, MJ_STOPPED),
    Payload("shared output", DAG + "{{ ns.a }}", NODES, MJ_STOPPED),
    Payload("shared ~", DAG + "{{ 'a' ~ ns.a }}", NODES, MJ_STOPPED),
    Payload("shared printf", DAG + "{{ '%s' % (ns.a,) }}", NODES, MJ_ERROR),
    Payload("shared str.format", DAG + "{{ '{}'.format(ns.a) }}", NODES, MJ_STOPPED),
    Payload("shared join", DAG + "{{ [ns.a]|join }}", NODES, MJ_STOPPED),
    Payload("shared pprint", DAG + "{{ ns.a|pprint }}", NODES, MJ_STOPPED),
    Payload("shared upper", DAG + "{{ ns.a|upper }}", NODES, MJ_STOPPED),
    Payload("shared ==", DAG2 + "{{ ns.a == ns.b }}", NODES, MJ_STOPPED),
    Payload("shared in", DAG2 + "{{ ns.a in [ns.b] }}", NODES, MJ_STOPPED),
    Payload("shared eq test", DAG2 + "{{ ns.a is eq(ns.b) }}", NODES, MJ_STOPPED),
    Payload("shared hash", TDAG + "{{ {ns.a: 1} }}", NODES, MJ_STOPPED),
    Payload("shared dict.get", TDAG + "{{ {}.get(ns.a) }}", NODES, "ok"),
    Payload("shared list.count", DAG2 + "{{ [ns.a].count(ns.b) }}", NODES, MJ_STOPPED),
    Payload("shared sort", DAG2 + "{{ [ns.a, ns.b]|sort }}", NODES, MJ_STOPPED),
    Payload("shared unique", TDAG + "{{ [ns.a, ns.a]|unique|list }}", NODES, MJ_STOPPED),
    Payload("shared namespace", DAG + "{{ ns }}", NODES, MJ_STOPPED),
    Payload("deep list", "{% set ns = namespace(a=1) %}{% for i in range(5000) %}{% set ns.a = [ns.a] %}"
            "{% endfor %}{{ ns.a|tojson }}", "RenderLimitError: max_value_depth", "RenderLimitError: max_value_depth"),
    # CPU
    Payload("nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "RenderLimitError: max_iterations", MJ_FUEL),
    Payload("recursive loop", DAG + "{% for x in [ns.a] recursive %}{{ loop(x) if x is iterable }}{% endfor %}",
            "RenderLimitError: max_iterations|render took over", MJ_FUEL),
    Payload("recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "RenderLimitError: recursion", "RenderError: recursion limit"),
    # Python methods on inputs (minijinja called them: growth, mutation)
    Payload("extend inputs", "{% for i in range(40) %}{% set _ = messages.extend(messages) %}{% endfor %}",
            "SecurityError: unsafe", READ_ONLY),
    Payload("update inputs", "{% set _ = messages[0].update({'a': 1}) %}{{ messages[0] }}",
            "SecurityError: unsafe", READ_ONLY),
    Payload("append inputs", "{{ messages.append(1) }}", "SecurityError: unsafe", READ_ONLY),
    Payload("big list to Python", "{{ ([1] * 100000000)|tojson }}", SIZE, MJ_STOPPED),
    Payload("8 GB allocation", "{{ '{:>8000000000}'.format('x') }}", SIZE, MJ_STOPPED, child=True),
    # sandbox escapes (held before; kept so they keep holding)
    Payload("dunder walk", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "SecurityError: __class__",
            "RenderError: undefined"),
    Payload("globals via cycler", "{{ cycler.__init__.__globals__.os.system('id') }}", "SecurityError: __init__",
            "RenderError: undefined"),
    Payload("format attribute walk", "{{ '{0.__class__.__mro__}'.format('') }}", "SecurityError: __class__",
            MJ_ERROR),
    Payload("self context", "{{ self._TemplateReference__context.environment }}", "SecurityError: unsafe",
            "RenderError: undefined"),
    Payload("include file", "{% include '/etc/passwd' %}", "RenderError: no loader",
            "RenderError: not found"),
    Payload("import file", "{% import '/etc/passwd' as p %}", "RenderError: no loader", "RenderError: not found"),
    Payload("function globals", "{{ raise_exception.__globals__.x.y }}", "SecurityError: __globals__",
            "RenderError: undefined"),
    # templates that broke the compiler with raw exceptions
    Payload("nested for", "{% for i in x %}" * 30 + "{% endfor %}" * 30, "TemplateError: max_nesting", "ok"),
    Payload("nested parens", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "TemplateError: nests too deeply",
            "TemplateError: recursion"),
    Payload("huge int literal", "{{ 1" + "0" * 5000 + " }}", "TemplateError: 4300 digits", "TemplateError: too large"),
    Payload("many tags", "{{ x }}" * 30000, "TemplateError: max_compiled_chars", "ok"),
    Payload("much code", "{{ x }}" * 15000, "TemplateError: max_compiled_chars", "ok"),
]
BY_NAME = {p.name: p for p in PAYLOADS}


# --------------------------------------------------------------------------- measuring

def _vm(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return None


def _reset_peak() -> bool:
    """Reset this process' peak RSS (Linux: /proc/self/clear_refs, "5")."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return _vm("VmHWM") is not None
    except OSError:
        return False


@contextmanager
def peak_growth() -> Iterator[list[int]]:
    """The peak memory growth of the block, in bytes, in ``result[0]``: peak RSS where Linux
    lets it be reset, else the peak of Python allocations (tracemalloc)."""
    result = [0]
    if _reset_peak():
        before = _vm("VmRSS") or 0
        yield result
        result[0] = (_vm("VmHWM") or 0) - before
    else:
        tracemalloc.start()
        try:
            yield result
            result[0] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def outcome(payload: Payload, engine: str, limits: RenderLimits) -> tuple[str, float, int]:
    """(``"Kind: message"`` or ``"ok"``, seconds, peak memory growth) of one render."""
    renderer = make_renderer(from_string(payload.source, name="payload.jinja"), engine, limits=limits)
    # the test session's own objects (cached analyses and fixed points of the whole corpus) are
    # left out of the collections the render triggers: a full collection over them took over
    # 0.5 s and ended a 2 ms render at its time limit (seen twice in full runs, never alone)
    gc.freeze()
    try:
        with peak_growth() as growth:
            t0 = time.monotonic()
            try:
                renderer.render(MESSAGES, add_generation_prompt=True)
                result = "ok"
            except ChatAutoparserError as e:
                result = f"{type(e).__name__}: {e}"
            elapsed = time.monotonic() - t0
    finally:
        gc.unfreeze()
    return result, elapsed, growth[0]


def matches(result: str, expected: str) -> bool:
    import re
    if expected == "ok":
        return result == "ok"
    kind, _, pattern = expected.partition(": ")
    got_kind, _, message = result.partition(": ")
    return got_kind == kind and re.search(pattern, message) is not None


_BASELINE: dict[str, Any] = {}


def normal_analysis(engine: str) -> dict[str, Any]:
    return analyze_template(from_string(NORMAL, name="normal.jinja"), engine=engine).to_dict()


def assert_healthy(engine: str) -> None:
    """A normal render and analysis, as before any payload; no interrupt left pending."""
    out = make_renderer(from_string(NORMAL), engine).render(MESSAGES, add_generation_prompt=True)
    assert out == "<|system|>Be brief.<|end|><|user|>Hi there<|end|><|assistant|>"
    deadline, n = time.monotonic() + 0.05, 0
    while time.monotonic() < deadline:
        n += sum(range(100))
    assert n > 0
    if engine not in _BASELINE:
        pytest.fail("no baseline analysis")  # taken by the fixture below
    assert normal_analysis(engine) == _BASELINE[engine]


@pytest.fixture(scope="module", autouse=True)
def baseline() -> None:
    for engine in ENGINES:
        _BASELINE[engine] = normal_analysis(engine)


# --------------------------------------------------------------------------- the payload suite

CHILD = r"""
import json, sys, time
from chat_autoparser.analyzer import from_string
from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.analyzer.render import make_renderer
src, engine = json.loads(sys.argv[1])
r = make_renderer(from_string(src), engine)
t0 = time.monotonic()
try:
    r.render([{"role": "user", "content": "hi"}]); result = "ok"
except ChatAutoparserError as e:
    result = f"{type(e).__name__}: {e}"
elapsed = time.monotonic() - t0
ok = make_renderer(from_string("{{ messages[0].content }}"), engine).render([{"role": "user", "content": "hi"}])
print(json.dumps([result, elapsed, ok]))
"""


def in_child(payload: Payload, engine: str) -> tuple[str, float]:
    """Render in a child process: if the guard regressed, the child dies, not the test run."""
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([payload.source, engine])], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-500:]}"
    result, elapsed, ok = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok == "hi"
    return result, elapsed


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(BY_NAME))
def test_payload(name: str, engine: str) -> None:
    payload = BY_NAME[name]

    def run() -> tuple[str, float, int]:
        return (*in_child(payload, engine), 0) if payload.child else outcome(payload, engine, SUITE_LIMITS)
    result, elapsed, growth = run()
    if elapsed >= 1.0:  # once more, nothing cached: a slow moment of a shared machine passes (CI
        # saw 1.06 s for a compile refused in 0.35 s here), a guard that regressed is slow again
        render._ASTS.cache_clear()
        render._COMPILED.cache_clear()
        result, elapsed, growth = min((result, elapsed, growth), run(), key=lambda r: r[1])
    assert matches(result, payload.expected(engine)), f"{engine}: {result!r}, expected {payload.expected(engine)!r}"
    assert elapsed < 1.0, f"{engine}: {elapsed:.2f} s for {result}"
    assert growth < MEMORY_BUDGET, f"{engine}: memory grew by {growth >> 20} MiB"
    assert_healthy(engine)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(BY_NAME))
def test_payload_default_limits_and_analysis(name: str, engine: str) -> None:
    """Default limits: the render ends within its time limit, the analysis within its budget."""
    payload = BY_NAME[name]
    if payload.child:
        pytest.skip("covered in a child process by test_payload")
    result, elapsed, growth = outcome(payload, engine, DEFAULT_LIMITS)
    assert result == "ok" or matches(result, payload.expected(engine).replace("render took over", "took over"))
    assert elapsed < DEFAULT_LIMITS.timeout_s + 1.0
    assert growth < MEMORY_BUDGET
    t0 = time.monotonic()
    try:
        analyze_template(from_string(payload.source, name="payload.jinja"), engine=engine)
    except ChatAutoparserError:
        pass
    assert time.monotonic() - t0 < DEFAULT_LIMITS.analysis_timeout_s + 1.0
    assert_healthy(engine)


# --------------------------------------------------------------------------- compiling

@pytest.mark.parametrize("name", [p.name for p in PAYLOADS if p.name.startswith("fold")])
def test_compiling_runs_no_template_code(name: str) -> None:
    """jinja2 evaluated printed constants while generating code: a gigabyte, seconds, and a
    compile cache that kept it. Now compiling allocates next to nothing."""
    from chat_autoparser.analyzer.render import compile_template
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        compile_template(BY_NAME[name].source, "immutable", RenderLimits(max_nesting=19))  # uncached
        elapsed = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024 and elapsed < 1.0


def test_compile_time_is_limited() -> None:
    """Few tags, millions of tokens: parsing stops at compile_timeout_s (it took seconds)."""
    src = "{{ f(" + "1," * 1_000_000 + ") }}"
    t0 = time.monotonic()
    with pytest.raises(TemplateError) as ei:
        analyze_template(from_string(src, name="long.jinja"), limits=RenderLimits(compile_timeout_s=0.3))
    assert time.monotonic() - t0 < 1.5
    assert "compile_timeout_s" in str(ei.value) and ei.value.template == "long.jinja"


@pytest.mark.parametrize("src,expected", [
    ("{% for i in x %}" * 30 + "{% endfor %}" * 30, "max_nesting"),  # was SyntaxError
    ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nests too deeply"),  # was RecursionError
    ("{{ 1" + "0" * 5000 + " }}", "4300 digits"),  # was ValueError
])
def test_compiler_breakers_are_template_errors(src: str, expected: str) -> None:
    with pytest.raises(TemplateError) as ei:
        analyze_template(from_string(src, name="deep.jinja"))
    assert expected in str(ei.value) and ei.value.template == "deep.jinja"


def test_compile_cache_is_bounded_by_source_size() -> None:
    from chat_autoparser.analyzer import render
    render._COMPILED.cache_clear()
    text = "x" * 1_000_000
    for i in range(40):  # 40 MB of distinct templates
        render.compile_template(text + str(i))
    assert render._COMPILED._chars <= render._COMPILED.max_chars


# --------------------------------------------------------------------------- analysis

SLOW = ("{% for i in range(49000) %}{% set x = messages|tojson %}{% endfor %}"
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_analysis_has_a_time_budget() -> None:
    """Slow within every render limit (about 0.5 s a probe; the analysis took 15-57 s)."""
    t0 = time.monotonic()
    with pytest.raises(RenderLimitError) as ei:
        analyze_template(from_string(SLOW, name="slow.jinja"), limits=RenderLimits(analysis_timeout_s=0.5))
    assert time.monotonic() - t0 < 1.5
    assert ei.value.probe and ei.value.template == "slow.jinja"
    assert "analysis_timeout_s" in str(ei.value) and ei.value.probe in str(ei.value)


def test_a_limit_is_not_retried_on_the_other_engine() -> None:
    """jinja2 refuses over a limit: minijinja, which would render it, is not asked."""
    from chat_autoparser.analyzer.prober import Prober
    prober = Prober(from_string("{{ 'abc' * 5 }}"), limits=RenderLimits(max_value_size=10))
    assert prober.render("p", [{"role": "user", "content": "x"}]) is None
    assert prober.failures["p"].kind == "limit" and not prober.fallback_used


def test_varying_header_is_reported() -> None:
    src = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}<|assistant {{ range(100000)|random }}|>{% endif %}")
    notes = analyze_template(from_string(src)).notes
    assert any(n.startswith("nondeterministic: probe") for n in notes), notes


def test_randomness_the_probes_miss_is_reported_from_the_source() -> None:
    src = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}<|assistant|>{% endif %}{% if greeting %}{{ ['a', 'b']|random }}{% endif %}")
    notes = analyze_template(from_string(src)).notes
    assert any("uses random" in n for n in notes), notes
    assert not any(n.startswith("nondeterministic") for n in analyze_template(from_string(NORMAL)).notes)
