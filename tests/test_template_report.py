"""``template-report``: inputs, stable JSON, Markdown/HTML sections, escaping, the baseline gate.

Runs on our own template plus three corpus templates (one analysis error among them), in this
process (``--jobs 1``), so the whole module takes a few seconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import chat_autoparser.tools.template_report as tr
from chat_autoparser.generator.triggers import trigger_start
from chat_autoparser.tools.template_report import EXIT_INPUT, EXIT_OK, EXIT_REGRESSION, Entry, main

REPO = Path(__file__).resolve().parents[1]
CHATML = REPO / "templates" / "chatml-think.jinja"
CORPUS_PICKS = ("llama.cpp/Apertus-8B-Instruct.jinja",        # name-as-key JSON calls, a grammar
                "llama.cpp/Qwen3-Coder.jinja",                # tagged XML arguments
                "extra/Kwaipilot-SRPO-Qwen-32B.jinja")         # the analysis refuses it


@pytest.fixture(scope="module")
def inputs(corpus_root: Path) -> list[str]:
    return [str(CHATML)] + [str(corpus_root / name) for name in CORPUS_PICKS]


@pytest.fixture(scope="module")
def run(inputs: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One CLI run over the inputs (all outputs and a baseline), shared by the tests that only read."""
    out = tmp_path_factory.mktemp("report")
    code = main([*inputs, "--out", str(out), "--write-baseline", str(out / "baseline.json"), "--jobs", "1",
                 "--quiet"])
    return {"code": code, "out": out, "report": json.loads((out / "report.json").read_text(encoding="utf-8")),
            "markdown": (out / "report.md").read_text(encoding="utf-8"),
            "html": (out / "report.html").read_text(encoding="utf-8")}


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# --------------------------------------------------------------------------------- the report

def test_report_records_every_template(run: dict[str, object]) -> None:
    report = run["report"]
    assert run["code"] == EXIT_OK
    names = [t["name"] for t in report["templates"]]
    assert names == sorted(names)
    # corpus files are named as in the manifest, with its family; our own template by its path
    assert set(CORPUS_PICKS) <= set(names)
    by_name = {t["name"]: t for t in report["templates"]}
    assert by_name["llama.cpp/Apertus-8B-Instruct.jinja"]["family"] == "apertus"
    refused = by_name["extra/Kwaipilot-SRPO-Qwen-32B.jinja"]
    assert refused["status"] == "error" and refused["error"]["type"] == "AnalysisError"
    assert refused["checks"]["analysis"] == "fail"
    chatml = next(t for t in report["templates"] if t["name"].endswith("chatml-think.jinja"))
    assert chatml["analysis"]["reasoning_mode"] == "REASONING_OPTIONAL"
    assert chatml["analysis"]["tool_format"] == "FUNC_JSON_OBJECT"
    assert chatml["checks"]["fixed_point/tool_call"] == "pass"
    assert chatml["checks"]["grammar/llguidance"] == "pass"
    assert chatml["checks"]["grammar/accepts/tool_call"] == "pass"
    # the scenario leaves out a required argument: the grammar is right to refuse it, so not checked
    assert chatml["checks"]["grammar/accepts/empty_arguments"] == "n/a"
    s = report["summary"]
    assert (s["templates"], s["analysed"], s["errors"]) == (4, 3, 1)
    assert s["fixed_point"]["content"]["pass"] == 3


def test_json_is_byte_identical_across_runs_apart_from_timings(inputs: list[str], run: dict[str, object],
                                                               tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for path in (first, second):
        assert main([*inputs, "--json", str(path), "--no-timings", "--jobs", "1", "--quiet"]) == EXIT_OK
    assert first.read_bytes() == second.read_bytes()

    def keys_sorted(pairs: list[tuple[str, object]]) -> dict:
        assert [k for k, _ in pairs] == sorted(k for k, _ in pairs)
        return dict(pairs)

    json.loads(first.read_text(encoding="utf-8"), object_pairs_hook=keys_sorted)
    with_timings = dict(run["report"])
    assert "timings" in with_timings and "per_template_ms" in with_timings["timings"]
    del with_timings["timings"]
    assert tr.report_json(with_timings) == first.read_text(encoding="utf-8")


def test_markdown_has_the_summary_sections(run: dict[str, object]) -> None:
    md = run["markdown"]
    for heading in ("# Chat template report", "## Render → parse fixed point", "## Grammars",
                    "## Prefix-cache roundtrip (string level)", "## Formats",
                    "## Templates", "## Errors"):
        assert f"\n{heading}\n" in f"\n{md}"
    assert "**4 templates**: 3 analysed, 1 errors" in md
    assert "| template | family | reasoning | tools | fixed point | grammar | reconstructs | roundtrip | analysis ms |" in md
    assert "| llama.cpp/Apertus-8B-Instruct.jinja | apertus |" in md
    assert "Kwaipilot-SRPO-Qwen-32B.jinja: AnalysisError" in md
    assert "Comparison with the baseline" not in md  # no baseline given


def test_html_is_self_contained_with_charts_and_details(run: dict[str, object]) -> None:
    page = run["html"]
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg") >= 3 and "Tool-call formats" in page and "Analysis time" in page
    assert page.count("<details") >= 4
    assert not re.search(r"<script|<link|@import|url\(|src=", page)
    assert "↵" in page  # markers show their whitespace


def test_html_and_markdown_escape_template_text(tmp_path: Path) -> None:
    evil = tmp_path / "evil<b>&x.jinja"
    evil.write_text(CHATML.read_text(encoding="utf-8").replace("<|im_start|>", "<script>alert(1)</script>"),
                    encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(tmp_path), "--out", str(out), "--jobs", "1", "--quiet"]) == EXIT_OK
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<b>&x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;assistant↵" in page  # the learned marker, escaped
    assert "evil&lt;b&gt;&amp;x.jinja" in page
    assert "<b>" not in (out / "report.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------- the gate

def test_same_baseline_exits_0(inputs: list[str], run: dict[str, object], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*inputs, "--markdown", str(tmp_path / "r.md"), "--baseline", str(run["out"] / "baseline.json"),
                 "--jobs", "1", "--quiet"])
    assert code == EXIT_OK
    assert "0 regressions" in capsys.readouterr().err
    assert "**No regressions.**" in (tmp_path / "r.md").read_text(encoding="utf-8")


def test_doctored_baseline_exits_1_and_names_the_regression(inputs: list[str], run: dict[str, object],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = json.loads((run["out"] / "baseline.json").read_text(encoding="utf-8"))
    doctored = next(t for t in baseline["templates"] if t["name"] == "extra/Kwaipilot-SRPO-Qwen-32B.jinja")
    doctored["checks"]["analysis"] = "pass"            # it "used to" analyse
    doctored["checks"]["fixed_point/tool_call"] = "pass"
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    code = main([*inputs, "--out", str(tmp_path / "out"), "--baseline", str(path), "--jobs", "1", "--quiet"])
    assert code == EXIT_REGRESSION
    err = capsys.readouterr().err
    assert ("REGRESSION extra/Kwaipilot-SRPO-Qwen-32B.jinja: analysis (pass → fail), "
            "fixed_point/tool_call (pass → n/a)") in err
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "**Regressions.** 2 regressions in 1 templates" in md and "### Regressions" in md
    assert json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["comparison"]["regressions"]


def test_a_broken_parser_is_caught_by_the_gate(run: dict[str, object], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A real regression, not a doctored file: the parser starts losing the last tool call."""
    from chat_autoparser.generator import MessageParser

    real_parse = MessageParser.parse

    def lossy_parse(self, text, *args, **kwargs):
        message = real_parse(self, text, *args, **kwargs)
        if message.get("tool_calls"):
            message["tool_calls"] = message["tool_calls"][:-1]
        return message

    monkeypatch.setattr(MessageParser, "parse", lossy_parse)
    code = main([str(CHATML), "--json", str(tmp_path / "r.json"), "--baseline", str(run["out"] / "baseline.json"),
                 "--jobs", "1", "--quiet"])
    assert code == EXIT_REGRESSION
    err = capsys.readouterr().err
    assert re.search(r"REGRESSION \S*chatml-think\.jinja: .*fixed_point/tool_call \(pass → fail\)", err)
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    problems = report["templates"][0]["scenarios"]["tool_call"]["problems"]
    assert "0 tool calls parsed, 1 expected" in problems


@pytest.mark.parametrize("make, expect", [
    (lambda d: [str(d / "missing.jinja")], "no such file or folder"),
    (lambda d: [str(d)], "no templates found"),
    (lambda d: [str(d), "--baseline", str(d / "none.json")], "cannot read the baseline"),
    (lambda d: [str(CHATML), "--baseline", str(d / "bad.json")], "the baseline is not JSON"),
    (lambda d: [str(CHATML), "--baseline", str(d / "other.json")], "not a template-report baseline"),
], ids=["missing-path", "empty-folder", "missing-baseline", "baseline-not-json", "baseline-wrong-shape"])
def test_bad_input_exits_2_with_one_line(make, expect: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "other.json").write_text('{"templates": [{"nom": 1}]}', encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a template", encoding="utf-8")
    args = make(tmp_path)
    assert main([*args, "--out", str(tmp_path / "out"), "--quiet"]) == EXIT_INPUT
    line = _one_line_error(capsys)
    assert line.startswith("template-report: error: ") and expect in line
    assert str(tmp_path) in line  # names the path


# ------------------------------------------------------------------------------- the pieces

def test_collect_walks_folders_model_dirs_and_manifests(corpus_root: Path, tmp_path: Path) -> None:
    (tmp_path / "a" / "model").mkdir(parents=True)
    (tmp_path / "a" / "model" / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    (tmp_path / "a" / "model" / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "a" / "x.jinja").write_text("{{ messages }}", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "y.jinja").write_text("{{ messages }}", encoding="utf-8")
    names = [e.name for e in tr.collect([str(tmp_path)])]
    assert names == ["a/model", "a/x.jinja"]  # the model folder is one template; hidden folders are skipped
    entries = tr.collect([str(corpus_root / "MANIFEST.tsv")])
    assert len(entries) >= 70 and all(e.family for e in entries[:5])
    assert [e.name for e in tr.collect([str(CHATML), str(CHATML)])] == [CHATML.as_posix(), f"{CHATML.as_posix()} (2)"]


def test_trigger_start_follows_llama_cpp() -> None:
    words = [{"type": "word", "value": "<tool_call>"}]
    assert trigger_start("hi <tool_call>{}", words) == 3
    assert trigger_start("no call", words) is None
    pattern = [{"type": "pattern", "value": r'\{\s*"name":\s*"(?:get_weather|search_docs)'}]
    assert trigger_start('x {"name": "get_weather"}', pattern) == 2  # from the match
    assert trigger_start('x {"name": "other"}', pattern) is None
    # with a capturing group, from the group (llama.cpp's lazy grammar, src/llama-grammar.cpp)
    grouped = [{"type": "pattern", "value": r'\{\s*"name":\s*"(get_weather|search_docs)'}]
    assert trigger_start('x {"name": "get_weather"}', grouped) == 12
    full = [{"type": "pattern_full", "value": r'[\s\S]*?(\[)[\s\S]*'}]
    assert trigger_start('say [f()]', full) == 4


def test_compare_classifies_changes() -> None:
    def report(checks: dict[str, dict[str, str]]) -> dict:
        return {"templates": [{"name": n, "checks": c} for n, c in checks.items()]}

    baseline = {"a": {"analysis": "pass", "fixed_point/x": "pass", "grammar/gbnf": "fail"},
                "gone": {"analysis": "pass"}}
    now = report({"a": {"analysis": "pass", "fixed_point/x": "n/a", "grammar/gbnf": "pass"},
                  "new": {"analysis": "fail"}})
    cmp = tr.compare(baseline, now)
    assert [(c.template, c.check, c.before, c.after) for c in cmp.regressions] == [
        ("a", "fixed_point/x", "pass", "n/a")]
    assert [(c.check, c.after) for c in cmp.improvements] == [("grammar/gbnf", "pass")]
    assert [(c.template, c.check) for c in cmp.new_failures] == [("new", "analysis")]
    assert cmp.missing == ["gone"]


def test_timeout_is_recorded_not_waited_for(tmp_path: Path) -> None:
    slow = tmp_path / "slow.jinja"
    # slow within every render limit (an endless loop now stops at once, on the loop budget)
    slow.write_text("{% for i in range(49000) %}{% set x = messages|tojson %}{% endfor %}"
                    "{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    rec, _ = tr.run_one(Entry("slow.jinja", str(slow)), timeout_s=0.5)
    assert rec["status"] == "timeout" and rec["error"]["type"] == "Timeout"
    assert rec["checks"]["analysis"] == "fail"


# --------------------------------------------------------------------------- README figures

def test_readme_figures_are_the_reports() -> None:
    """The README's corpus paragraph is what tools/readme_figures.py writes from the kept
    summary: a hand edit, or a summary regenerated without the README, fails."""
    from chat_autoparser.tools.readme_figures import DEVIATIONS, README, SUMMARY, block_of, deviations_markdown, figures_markdown
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    readme = README.read_text(encoding="utf-8")
    assert block_of(readme) == figures_markdown(summary)
    assert block_of(readme, DEVIATIONS) == deviations_markdown(summary)


def test_readme_summary_is_the_baselines() -> None:
    """The kept summary counts what the committed baseline records (the report both came from)."""
    from chat_autoparser.tools.readme_figures import SUMMARY
    summary = json.loads(SUMMARY.read_text(encoding="utf-8"))
    baseline = tr.load_baseline(str(Path(__file__).parent / "report-baseline.json"))
    assert summary["templates"] == len(baseline)
    assert summary["analysed"] == sum(c.get("analysis") == "pass" for c in baseline.values())
    assert summary["errors"] + summary["timeouts"] == sum(c.get("analysis") != "pass" for c in baseline.values())
    for scenario, f in summary["fixed_point"].items():
        for status in ("pass", "fail"):
            counted = sum(c.get(f"fixed_point/{scenario}") == status for c in baseline.values())
            assert f[status] == counted, (scenario, status)

    def count(prefix: str) -> int:
        return sum(v == "pass" for c in baseline.values() for k, v in c.items() if k.startswith(prefix))
    assert summary["reconstructs"]["ok"] == count("reconstructs/")
    assert sum(v["pass"] for v in summary["deviations"].values()) == count("deviation/")
    assert summary["grammar"]["accepts"] == count("grammar/accepts/")
