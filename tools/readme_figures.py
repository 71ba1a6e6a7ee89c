"""The README's corpus figures, written from a template report instead of by hand.

``template-report --corpus --out report`` measures; this writes what it measured into the
README between the ``<!-- report-figures -->`` and ``<!-- /report-figures -->`` lines (and the
deviation suite's pass rate between ``<!-- deviation-figures -->`` lines), and
keeps the summary it wrote them from in ``tests/report-summary.json``, so a test can tell a
hand edit (or a stale figure) from the report's::

    template-report --corpus --out /tmp/report --baseline tests/report-baseline.json
    python -m chat_autoparser.tools.readme_figures /tmp/report/report.json

Example::

    >>> s = {"templates": 2, "analysed": 2, "errors": 0, "timeouts": 0, "unchecked_tool_templates": {},
    ...      "fixed_point": {"content": {"pass": 2, "fail": 0, "spliced": 1}}, "tool_templates": 1,
    ...      "reconstructs": {"ok": 2, "checked": 2},
    ...      "grammar": {"grammars": 1, "templates_with_grammar": 1, "lazy": 1, "gbnf_clean": 1,
    ...                  "llguidance_compiled": 1, "accepts": 3, "accept_checked": 3}}
    >>> print(figures_markdown(s))  # doctest: +NORMALIZE_WHITESPACE
    Measured on the 2-template corpus: 2 templates analysed, 0 typed `AnalysisError`s, 0 timeouts.
    Render → parse fixed point (pass / fail per scenario, of which spliced onto the prompt, and of which
    the call its instructions spell): content 2/0 (1, 0) (the rest do not apply to the template, or it
    drops the reasoning they would read back). 0 of the 1 templates that render tool calls or the
    request's tools have no checked tool-call output (listed in the report with the reason).
    Re-rendering the parsed message reproduces the template's own text in 2 of 2 cases. 1 distinct
    grammars (1 templates, 1 lazy): 1 pass our strict GBNF check, 1 compile in llguidance, and
    llguidance accepts 3 of 3 rendered tool-call outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SUMMARY = REPO / "tests" / "report-summary.json"
DEVIATIONS = "deviation-figures"  # a second block: the deviation suite's pass rate
# The scenarios in the order the README gives them (a wrapped line never starts with "+").
NAMES = {"content": "content", "reasoning+content": "reasoning and content", "tool_call": "one tool call",
         "parallel_tool_calls": "parallel calls", "content+tool_calls": "content and calls",
         "reasoning+tool_calls": "reasoning and calls", "tricky_arguments": "tricky arguments",
         "empty_arguments": "empty arguments"}
# What the README shows of a report's summary (the rest changes with the machine or is detail).
KEPT = ("templates", "analysed", "errors", "timeouts", "unchecked_tool_templates", "unchecked_reasoning_templates",
        "fixed_point", "reconstructs",
        "grammar", "tool_templates", "deviations")


def _instructed(summary: dict[str, Any]) -> str:
    """The tool templates checked only on the call their instructions spell."""
    n = summary["fixed_point"].get("tool_call", {}).get("instructed", 0)
    return (f", and {n} more only on the call their instructions spell, read by the reader that gives the "
            f"analysis its syntax" if n else "")


def _reasoning(summary: dict[str, Any]) -> str:
    """The templates that write reasoning with none of it checked (older summaries lack them)."""
    if "unchecked_reasoning_templates" not in summary:
        return ""
    return (f"; {len(summary['unchecked_reasoning_templates'])} templates that write reasoning have no "
            f"checked reasoning output (also listed with the reason)")


def figures_markdown(summary: dict[str, Any]) -> str:
    """The README paragraph for ``summary`` (a report's ``summary``), wrapped at 100 columns."""
    order = [n for n in NAMES if n in summary["fixed_point"]] + sorted(set(summary["fixed_point"]) - set(NAMES))
    fixed = ", ".join(f"{NAMES.get(name, name)} {f['pass']}/{f['fail']} ({f['spliced']}, {f.get('instructed', 0)})"
                      for name in order for f in [summary["fixed_point"][name]])
    g, r = summary["grammar"], summary["reconstructs"]
    unchecked = len(summary["unchecked_tool_templates"])
    text = (f"Measured on the {summary['templates']}-template corpus: {summary['analysed']} templates analysed, "
            f"{summary['errors']} typed `AnalysisError`s, {summary['timeouts']} timeouts. Render → parse fixed "
            f"point (pass / fail per scenario, of which spliced onto the prompt, and of which the call its "
            f"instructions spell): {fixed} (the rest do not apply to the template, or it drops the reasoning "
            f"they would read back). {unchecked} of the {summary['tool_templates']} templates that render "
            f"tool calls or the request's tools have no checked tool-call output (listed in the report with the reason)"
            f"{_instructed(summary)}{_reasoning(summary)}. Re-rendering the parsed message reproduces the "
            f"template's own text in {r['ok']} of {r['checked']} cases. {g['grammars']} distinct grammars "
            f"({g['templates_with_grammar']} templates, {g['lazy']} lazy): {g['gbnf_clean']} pass our strict GBNF "
            f"check, {g['llguidance_compiled']} compile in llguidance, and llguidance accepts {g['accepts']} of "
            f"{g['accept_checked']} rendered tool-call outputs.")
    return "\n".join(textwrap.wrap(text, 100, break_on_hyphens=False))


def deviations_markdown(summary: dict[str, Any]) -> str:
    """The README sentence on the deviation suite, from a report's per-perturbation counts.

    >>> print(deviations_markdown({"deviations": {"a": {"pass": 3, "fail": 1}, "b": {"pass": 4, "fail": 0}}}))
    Measured by the deviation checks of `template-report --corpus` (the perturbations of
    `tests/test_deviations.py`, 2 kinds): 7 of 8 (template, perturbation) pairs pass (87.5 %).
    """
    d = summary["deviations"]
    passed, failed = sum(v["pass"] for v in d.values()), sum(v["fail"] for v in d.values())
    text = (f"Measured by the deviation checks of `template-report --corpus` (the perturbations of "
            f"`tests/test_deviations.py`, {len(d)} kinds): {passed} of {passed + failed} (template, perturbation) "
            f"pairs pass ({100 * passed / max(1, passed + failed):.1f} %).")
    return "\n".join(textwrap.wrap(text, 100))


def kept(summary: dict[str, Any]) -> dict[str, Any]:
    """The part of a summary the README is written from."""
    return {k: summary[k] for k in KEPT if k in summary}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name} -->", f"<!-- /{name} -->"


def replace_block(readme: str, block: str, name: str = "report-figures") -> str:
    """``readme`` with the text between the ``name`` markers replaced by ``block``."""
    begin, end = _markers(name)
    i, j = readme.find(begin), readme.find(end)
    if i < 0 or j < i:
        raise ValueError(f"README has no {begin} ... {end} block")
    return readme[:i + len(begin)] + "\n" + block + "\n" + readme[j:]


def block_of(readme: str, name: str = "report-figures") -> str:
    begin, end = _markers(name)
    i, j = readme.find(begin), readme.find(end)
    return readme[i + len(begin):j].strip("\n") if 0 <= i < j else ""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="report.json written by template-report --out")
    args = ap.parse_args(argv)
    summary = kept(json.loads(Path(args.report).read_text(encoding="utf-8"))["summary"])
    readme = replace_block(README.read_text(encoding="utf-8"), figures_markdown(summary))
    README.write_text(replace_block(readme, deviations_markdown(summary), DEVIATIONS), encoding="utf-8")
    SUMMARY.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote the figures into {README.name} and {SUMMARY.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
