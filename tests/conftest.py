"""Shared fixtures: the external corpus (see corpus_fixtures.py) and a per-session analysis cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from corpus_fixtures import (corpus, corpus_entry, corpus_root, pytest_generate_tests,  # noqa: E402,F401
                             session_corpus)

from chat_autoparser.analyzer import analyze_template  # noqa: E402
from chat_autoparser.errors import ChatAutoparserError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# no test reads or writes the user's analysis cache (template-report turns it on by default)
os.environ["AUTOPARSER_CACHE"] = "off"
_ANALYSES: dict[str, object] = {}
_FIXED_POINTS: dict[str, dict] = {}


def analysis_or_error(path: Path):
    """The analysis of a template, computed once per test session (or the error it raised)."""
    key = str(path)
    if key not in _ANALYSES:
        try:
            _ANALYSES[key] = analyze_template(path)
        except ChatAutoparserError as e:
            _ANALYSES[key] = e
    return _ANALYSES[key]


@pytest.fixture
def analyzed():
    return analysis_or_error


def fixed_points_of(path: Path) -> dict:
    """Every render → parse fixed-point scenario of a template (``generator.verify.fixed_point``), computed
    once per session: ``{scenario: FixedPoint}`` (empty when the analysis failed)."""
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.generator.verify.fixed_point import SCENARIOS, fixed_point
    key = str(path)
    if key not in _FIXED_POINTS:
        a = analysis_or_error(path)
        if isinstance(a, ChatAutoparserError):
            _FIXED_POINTS[key] = {}
        else:
            t = load_template(path)
            _FIXED_POINTS[key] = {s: fixed_point(t, a, s) for s in SCENARIOS}
    return _FIXED_POINTS[key]


@pytest.fixture
def fixed_points():
    return fixed_points_of


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (the llama.cpp extended check) run only when asked for with ``-m slow``
    (or any ``-m`` expression naming it). (The examples of ``analyzer.corpus`` fetch the corpus
    first themselves: tests/test_doctests.py.)"""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="extended check: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def llama_vocab(pytestconfig: pytest.Config) -> Path:
    """The vocab-only GGUF llama.cpp checks tokenize with; skips, saying why, without
    llama-cpp-python or without the vocabularies ``fetch-corpus`` extracts."""
    from chat_autoparser.analyzer.corpus import CorpusError, vocab_dir
    from chat_autoparser.generator.verify.engines import llama_cpp_available

    if not llama_cpp_available():
        pytest.skip("llama_cpp (llama-cpp-python) is not installed; build it with "
                    "CMAKE_ARGS=-DLLAVA_BUILD=OFF pip install llama-cpp-python==0.3.36 (about 8 min)")
    try:
        session_corpus(pytestconfig)
        path = vocab_dir() / "ggml-vocab-qwen2.gguf"
    except CorpusError as e:
        pytest.skip(f"no llama.cpp test vocabulary: {e}")
    if not path.is_file():
        pytest.skip(f"{path} is missing; run `fetch-corpus`")
    return path
