"""Work done once: probe renders shared between inputs a template sees alike, and whole analyses
kept by content (in memory, and on disk under ``AUTOPARSER_CACHE``).

No timings here: speed is measured by ``benchmarks/analysis_speed.py``.
"""

from __future__ import annotations

import pytest

from chat_autoparser.analyzer.load import from_string
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.analyzer.template_info import template_info

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


# --------------------------------------------------------------------------- whole analyses

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import chat_autoparser.analyzer.analyze as analyze_module  # noqa: E402
from chat_autoparser.analyzer import analysis_cache  # noqa: E402
from chat_autoparser.analyzer.analyze import analyze_template  # noqa: E402
from chat_autoparser.analyzer.disk_cache import DiskCache  # noqa: E402
from chat_autoparser.errors import AnalysisError, RenderLimitError, TemplateError  # noqa: E402
from chat_autoparser.analyzer.limits import RenderLimits  # noqa: E402

CHATML = Path(__file__).resolve().parents[1] / "templates" / "chatml-think.jinja"


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates analysed for real (not found in a cache), in order; every test
    starts with nothing kept in memory and the disk cache off."""
    analysis_cache.cache_clear()
    monkeypatch.setenv("AUTOPARSER_CACHE", "off")
    names: list[str] = []
    real = analyze_module._analyze

    def counting(loaded, *args):
        names.append(loaded.name)
        return real(loaded, *args)

    monkeypatch.setattr(analyze_module, "_analyze", counting)
    yield names
    analysis_cache.cache_clear()


def chatml(name: str = "a.jinja"):
    return from_string(CHATML.read_text(encoding="utf-8"), name=name)


def test_kept_in_memory_by_content_and_relabelled(computed: list[str]) -> None:
    first = analyze_template(chatml("a.jinja"))
    again = analyze_template(chatml("b.jinja"))
    assert computed == ["a.jinja"]
    assert again.template == "b.jinja" and again.to_dict() == {**first.to_dict(), "template": "b.jinja"}
    assert analyze_template(chatml(), cache=False) == first and computed == ["a.jinja", "a.jinja"]


@pytest.mark.parametrize("change", [
    lambda: {"engine": "minijinja"},
    lambda: {"limits": RenderLimits(max_iterations=40_000)},
    lambda: {"template": from_string(CHATML.read_text(encoding="utf-8") + " ", name="a.jinja")},
    lambda: {"template": from_string(CHATML.read_text(encoding="utf-8"), name="a.jinja",
                                     special_tokens={"bos_token": "<bos>", "eos_token": "<eos>"})},
], ids=["engine", "limits", "text", "special-tokens"])
def test_every_setting_is_in_the_key(computed: list[str], change) -> None:
    analyze_template(chatml())
    kwargs = {"template": chatml(), **change()}
    analyze_template(kwargs.pop("template"), **kwargs)
    assert len(computed) == 2


def test_errors_the_template_decides_are_kept(computed: list[str]) -> None:
    for name in ("x.jinja", "y.jinja"):
        with pytest.raises(TemplateError, match=rf"^{name}:1: Jinja syntax error"):
            analyze_template(from_string("{% if %}", name=name))
        with pytest.raises(AnalysisError, match=rf"^{name}, probe .*renders no prompt"):
            analyze_template(from_string("{{ raise_exception('never') }}", name=name))
    assert computed == ["x.jinja", "x.jinja"]


def test_time_limits_and_varying_renders_are_not_kept(computed: list[str]) -> None:
    slow = from_string("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    limits = RenderLimits(timeout_s=0.05, max_iterations=10**15)
    for _ in range(2):
        with pytest.raises((AnalysisError, RenderLimitError)):
            analyze_template(slow, limits=limits)
    varying = from_string("{{ [1, 2, 3] | random }}" + PLAIN)
    for _ in range(2):
        assert any("differ" in n for n in analyze_template(varying).notes)
    assert len(computed) == 4


def test_kept_on_disk_across_processes(computed: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPARSER_CACHE", str(tmp_path))
    first = analyze_template(chatml("a.jinja"))
    with pytest.raises(TemplateError):
        analyze_template(from_string("{% if %}", name="broken.jinja"))
    entries = sorted((tmp_path / "analyses").glob("*.json"))
    assert len(entries) == 2 and not list((tmp_path / "analyses").glob(".tmp-*"))
    analysis_cache.cache_clear()  # as a new process would start
    assert analyze_template(chatml("b.jinja")).to_dict() == {**first.to_dict(), "template": "b.jinja"}
    with pytest.raises(TemplateError, match="^again.jinja:1: "):
        analyze_template(from_string("{% if %}", name="again.jinja"))
    assert computed == ["a.jinja", "broken.jinja"]


def _entry(tmp_path: Path) -> Path:
    (entry,) = (tmp_path / "analyses").glob("*.json")
    return entry


@pytest.mark.parametrize("spoil", [
    lambda d: "",
    lambda d: json.dumps(d)[:-40],
    lambda d: json.dumps({**d, "key": "0" * 64}),
    lambda d: json.dumps({**d, "value": {**d["value"], "format": "other"}}),
    lambda d: json.dumps({"key": d["key"], "value": {**d["value"], "analysis": {
        **d["value"]["analysis"], "generation_prompt": ["<|im_start|>"]}}}),
    lambda d: json.dumps({"key": d["key"], "value": {**d["value"], "analysis": {
        **d["value"]["analysis"], "unknown_field": 1}}}),
    lambda d: json.dumps({"key": d["key"], "value": {**d["value"], "analysis": {
        **d["value"]["analysis"], "sha256": "0" * 64}}}),
    lambda d: "[" * 100_000,
], ids=["empty", "truncated", "other-key", "other-format", "wrong-type", "unknown-field", "other-source",
        "deep-nesting"])
def test_a_spoilt_disk_entry_is_ignored_and_replaced(computed: list[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, spoil) -> None:
    monkeypatch.setenv("AUTOPARSER_CACHE", str(tmp_path))
    first = analyze_template(chatml())
    entry = _entry(tmp_path)
    entry.write_text(spoil(json.loads(entry.read_text(encoding="utf-8"))), encoding="utf-8")
    analysis_cache.cache_clear()
    assert analyze_template(chatml()) == first
    assert len(computed) == 2
    analysis_cache.cache_clear()
    analyze_template(chatml())  # the entry was written again
    assert len(computed) == 2


def test_disk_cache_stays_under_its_size(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=2_000)
    for i in range(40):
        cache.put(f"{i:064x}", {"text": "x" * 200})
    total = sum(p.stat().st_size for p in tmp_path.glob("*.json"))
    assert total <= 2_000 and cache.get(f"{39:064x}") == {"text": "x" * 200}
    assert cache.get(f"{0:064x}") is None  # the oldest went first


def test_template_report_reads_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chat_autoparser.tools.template_report import main
    monkeypatch.setenv("AUTOPARSER_CACHE", str(tmp_path / "cache"))
    args = [str(CHATML), "--json", str(tmp_path / "r.json"), "--no-timings", "--jobs", "1", "--quiet"]
    assert main(args) == 0
    first = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert len(list((tmp_path / "cache" / "analyses").glob("*.json"))) == 1
    analysis_cache.cache_clear()
    assert main(args) == 0 and (tmp_path / "r.json").read_text(encoding="utf-8") == first
    assert main([*args, "--no-cache"]) == 0 and (tmp_path / "r.json").read_text(encoding="utf-8") == first


def test_disk_cache_reads_only_regular_files(tmp_path: Path) -> None:
    import os
    cache = DiskCache(tmp_path)
    key = "ab" * 32
    os.mkfifo(tmp_path / f"{key}.json")  # would block a plain open
    assert cache.get(key) is None
    os.unlink(tmp_path / f"{key}.json")
    (tmp_path / "elsewhere.json").write_text('{"key": "%s", "value": {"x": 1}}' % key, encoding="utf-8")
    os.symlink(tmp_path / "elsewhere.json", tmp_path / f"{key}.json")
    assert cache.get(key) is None
