"""The examples in the library's docstrings, run on the modules by the one name the package
gives them (``chat_autoparser.analyzer.…``, ``chat_autoparser.generator.…``).

pytest's own ``--doctest-modules`` would import ``analyzer/bounded.py`` as a second, top-level
``analyzer`` package beside ``chat_autoparser.analyzer``; these tests find the same examples
(``doctest.DocTestFinder``, each docstring one test, pytest's default ``ELLIPSIS``) in the
modules the rest of the suite uses.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

from chat_autoparser.errors import ChatAutoparserError
from corpus_fixtures import session_corpus

PACKAGES = ("chat_autoparser.analyzer", "chat_autoparser.generator")


def _module_names() -> list[str]:
    names = ["chat_autoparser"]
    for package in PACKAGES:
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(importlib.import_module(package).__path__, package + ".")]
    return sorted(names)


def _examples() -> dict[str, doctest.DocTest]:
    finder = doctest.DocTestFinder()
    tests = {}
    for name in _module_names():
        for test in finder.find(importlib.import_module(name), name):
            if test.examples:
                tests[test.name] = test
    return tests


EXAMPLES = _examples()


def test_every_library_module_is_found() -> None:
    """The walk reaches the modules the examples live in (a package that stops importing would
    drop its examples silently)."""
    names = _module_names()
    assert "chat_autoparser.generator.verify.fixed_point" in names and "chat_autoparser.analyzer.render" in names
    assert len(EXAMPLES) > 100


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_doctest(name: str, request: pytest.FixtureRequest) -> None:
    if name.startswith("chat_autoparser.analyzer.corpus"):  # its examples read the corpus
        try:
            session_corpus(request.config)
        except ChatAutoparserError:
            pass  # the examples fail with the reason
    test = EXAMPLES[name]
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.append, clear_globs=True)
    assert result.failed == 0, "".join(out)
