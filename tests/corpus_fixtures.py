"""Pytest fixtures for the external template corpus (wire them in ``tests/conftest.py``).

A missing corpus fails the tests that need it, with the hint to run ``fetch-corpus``; it never
skips them silently. Every test parametrized over ``corpus_entry`` carries the ``corpus`` marker,
so ``pytest -m "not corpus"`` leaves them out on purpose.

Example (in a test module)::

    def test_renders(corpus_entry):            # one test per template, id = its corpus name
        text = corpus_entry.path.read_text(encoding="utf-8")

    def test_count(corpus):                    # the whole list at once
        assert len(corpus) >= 70
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.corpus import CorpusEntry, CorpusError, corpus_dir, corpus_entries


@pytest.fixture(scope="session")
def corpus_root() -> Path:
    """The corpus folder ``corpus_dir()`` finds (raises ``CorpusError`` with the fetch hint)."""
    return corpus_dir()


@pytest.fixture(scope="session")
def corpus(corpus_root: Path) -> list[CorpusEntry]:
    """Every corpus entry, in manifest order (files are not hashed)."""
    return corpus_entries(corpus_root)


def corpus_params() -> list:
    """One ``pytest.param`` per corpus entry, or a single one carrying the ``CorpusError``.

    The error travels as a parameter so that a missing corpus fails the tests that need it
    instead of breaking the collection of every test.
    """
    try:
        entries = corpus_entries()
    except CorpusError as e:
        return [pytest.param(e, id="corpus-missing", marks=pytest.mark.corpus)]
    return [pytest.param(e, id=e.name, marks=pytest.mark.corpus) for e in entries]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that asks for ``corpus_entry`` over the corpus."""
    if "corpus_entry" in metafunc.fixturenames:
        metafunc.parametrize("corpus_entry", corpus_params(), indirect=True)


@pytest.fixture
def corpus_entry(request: pytest.FixtureRequest) -> CorpusEntry:
    """One corpus entry (see ``pytest_generate_tests``)."""
    if isinstance(request.param, CorpusError):
        raise request.param
    return request.param
