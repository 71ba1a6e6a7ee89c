"""The analysis works by analysis alone: no code path names a model or matches a marker that
a real template uses. This test collects every marker-shaped literal from the corpus templates
and every family name from the manifest, then reads every string constant in our code (not
docstrings or comments, which may cite examples) and fails on any hit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from analyzer.corpus import CorpusEntry
from analyzer.markers import markers_in
from analyzer.template_info import template_info

REPO = Path(__file__).resolve().parents[1]
CODE_DIRS = ("analyzer", "generator", "tools")
# The bos/eos stand-ins for a bare .jinja (analyzer/load.py STAND_IN_TOKENS) are render
# inputs, not markers the analysis looks for.
ALLOWED_MARKERS = {("analyzer/load.py", "<s>"), ("analyzer/load.py", "</s>")}
# The corpus fetcher must name its data source (the llama-cpp-python sdist and its paths).
DATA_SOURCE_FILES = {"analyzer/corpus.py", "tools/fetch_corpus.py"}
# Manifest "families" that are plain English words or format names, not model names.
NOT_MODEL_NAMES = {"family", "chatml", "alpaca", "spark", "dots", "intel", "salesforce", "microsoft", "nvidia",
                   "tencent", "allenai", "openai"}
# Names of software we check against (grammar engines, the renderer we match), which contain a
# family word: removed from a string before its words are looked at.
TOOL_NAMES = re.compile(r"llama[._-]cpp(?:[._-]python)?", re.IGNORECASE)


def _code_strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def _corpus_markers(corpus: list[CorpusEntry]) -> set[str]:
    found: set[str] = set()
    for entry in corpus:
        try:
            literals = template_info(entry.path.read_text(encoding="utf-8")).literals
        except Exception:  # a template jinja2 cannot parse has no literals to take
            continue
        for lit in literals:
            found.update(markers_in(lit))
    return found


def test_no_corpus_marker_in_code(corpus: list[CorpusEntry]):
    markers = _corpus_markers(corpus)
    assert len(markers) > 200, "corpus markers were not collected"
    hits = []
    for d in CODE_DIRS:
        for path in sorted((REPO / d).rglob("*.py")):
            for line, s in _code_strings(path):
                for m in markers_in(s):
                    if m in markers and (str(path.relative_to(REPO)), m) not in ALLOWED_MARKERS:
                        hits.append(f"{path.relative_to(REPO)}:{line}: {m!r}")
    assert not hits, "model-specific markers in code:\n" + "\n".join(hits)


def test_no_model_name_in_code(corpus: list[CorpusEntry]):
    families = {e.family.lower() for e in corpus if len(e.family) >= 4} - NOT_MODEL_NAMES
    assert len(families) > 50
    hits = []
    for d in CODE_DIRS:
        for path in sorted((REPO / d).rglob("*.py")):
            if str(path.relative_to(REPO)) in DATA_SOURCE_FILES:
                continue
            for line, s in _code_strings(path):
                words = set(re.findall(r"[a-z0-9]+", TOOL_NAMES.sub(" ", s).lower()))
                hits += [f"{path.relative_to(REPO)}:{line}: {f!r} in {s[:60]!r}" for f in families if f in words]
    assert not hits, "model names in code:\n" + "\n".join(hits)
