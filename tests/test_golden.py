"""Every corpus template's analysis equals its reviewed golden file (tests/golden/)."""

from __future__ import annotations

import difflib
import json

import pytest

from golden_io import dumps, golden_path, golden_record

from chat_autoparser.analyzer.structures import TemplateAnalysis


def test_golden(corpus_entry, analyzed):
    path = golden_path(corpus_entry.name)
    assert path.exists(), f"no golden file for {corpus_entry.name}: run python tests/update_golden.py and review it"
    expected = path.read_text(encoding="utf-8")
    actual = dumps(golden_record(analyzed(corpus_entry.path)))
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            "golden", "now", n=2))
        raise AssertionError(f"{corpus_entry.name} changed (review, then update_golden.py):\n{diff[:6000]}")


def test_round_trip(corpus_entry, analyzed):
    """to_dict/from_dict round-trip, through JSON text as well."""
    a = analyzed(corpus_entry.path)
    if not isinstance(a, TemplateAnalysis):
        pytest.skip("no analysis (its error is checked by test_golden)")
    assert TemplateAnalysis.from_dict(a.to_dict()) == a
    assert TemplateAnalysis.from_dict(json.loads(json.dumps(a.to_dict()))) == a
