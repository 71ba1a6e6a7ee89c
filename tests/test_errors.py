"""One error tree: every error the package raises on purpose is defined in ``chat_autoparser.errors``
under ``ChatAutoparserError``; the exceptions defined elsewhere are control flow that never
leaves the module that raises it (each listed here with where it is caught)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import chat_autoparser.errors as errors
from chat_autoparser.errors import ChatAutoparserError

REPO = Path(__file__).resolve().parents[1]
LIBRARY = ("chat_autoparser", "analyzer", "generator", "tools")
# Exceptions used for control flow, each caught where it is raised (they never reach a caller).
CONTROL_FLOW = {
    "analyzer/watchdog.py": {"Interrupted", "TimedOut"},          # the watchdog's interrupt, turned into RenderLimitError
    "analyzer/minijinja_engine.py": {"_WorkerGone"},              # a dead worker, restarted or turned into RenderError
    "analyzer/tool_calls/context.py": {"_Fail"},                  # a probe the tool analysis gives up on
    "generator/verify/gbnf_check.py": {"_Stop"},                  # the GBNF checker's early exit
    "generator/verify/bridge_check.py": {"BridgeBroke"},          # an assertion of the bridge check (a test's failure)
    "tools/template_report.py": {"TemplateTimeout"},              # the report's per-template alarm, recorded as a timeout
}


def _exception_classes(path: Path) -> set[str]:
    """Classes in ``path`` whose bases name an exception type."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
            if any(b.endswith(("Error", "Exception", "Exit")) or b in ("BaseException", "NotExpressible")
                   for b in bases):
                out.add(node.name)
    return out


def test_every_error_is_in_the_tree() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) >= 15
    assert all(issubclass(c, ChatAutoparserError) for c in classes), [c for c in classes
                                                                       if not issubclass(c, ChatAutoparserError)]


def test_no_error_is_defined_elsewhere() -> None:
    found = {}
    for folder in LIBRARY:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            if rel == "chat_autoparser/errors.py":
                continue
            if names := _exception_classes(path):
                found[rel] = names
    assert found == CONTROL_FLOW


def test_the_old_names_are_the_same_classes() -> None:
    """The modules that raise an error still name it, as the one class of the tree."""
    from chat_autoparser.analyzer import AnalysisError
    from chat_autoparser.analyzer.corpus import CorpusError
    from chat_autoparser.generator.export import NotExpressible
    from chat_autoparser.generator.verify.engines import EngineError
    from chat_autoparser.generator.verify.gbnf_check import GrammarError

    assert (AnalysisError, CorpusError, NotExpressible, EngineError, GrammarError) == (
        errors.AnalysisError, errors.CorpusError, errors.NotExpressible, errors.EngineError, errors.GrammarError)
    assert not issubclass(errors.EngineError, ValueError) and not issubclass(errors.GrammarError, ValueError)
