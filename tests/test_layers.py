"""The layers import one way: errors ← analyzer ← generator (product) ← generator.verify ←
tools (the command-line tools) and integrations (engine adapters; neither imports the other). Read from every import statement of the library's source,
relative or absolute, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# folder in the repository -> the package it is, inside chat_autoparser
PARTS = {"chat_autoparser": "chat_autoparser", "analyzer": "chat_autoparser.analyzer",
         "generator": "chat_autoparser.generator", "tools": "chat_autoparser.tools",
         "integrations": "chat_autoparser.integrations"}
LAYERS = ["chat_autoparser.errors", "chat_autoparser.analyzer", "chat_autoparser.generator",
          "chat_autoparser.generator.verify", "chat_autoparser.tools", "chat_autoparser.integrations"]


def _layer(module: str) -> int | None:
    """The index in LAYERS of the deepest layer ``module`` belongs to (None: not ours, or the root)."""
    best = None
    for i, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            best = i
    return best


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO)
    parts = list(rel.with_suffix("").parts)
    base = PARTS[parts[0]].split(".") + parts[1:]
    if base[-1] == "__init__":
        base = base[:-1]
    return ".".join(base)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out += [(node.lineno, f"{target}.{a.name}" if not node.module and node.level else target)
                    for a in node.names]
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value  # importlib.import_module("...") (relative: to this package)
            out.append((node.lineno, package + name if name.startswith(".") else name))
    return out


def _library_files() -> list[Path]:
    return [p for folder in PARTS for p in sorted((REPO / folder).rglob("*.py"))]


def test_module_names() -> None:
    assert _module_name(REPO / "generator" / "verify" / "engines.py") == "chat_autoparser.generator.verify.engines"
    assert _module_name(REPO / "chat_autoparser" / "errors.py") == "chat_autoparser.errors"
    assert _module_name(REPO / "analyzer" / "__init__.py") == "chat_autoparser.analyzer"


@pytest.mark.parametrize("path", _library_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_imports_a_layer_above_its_own(path: Path) -> None:
    module = _module_name(path)
    own = _layer(module)
    if own is None:  # the package's root: it gathers the public names of every layer
        return
    upward = [(line, target) for line, target in _imports(path, module)
              if (layer := _layer(target)) is not None and layer > own]
    assert not upward, f"{module} imports above its layer: {upward}"
    assert not [t for _, t in _imports(path, module) if t.split(".")[0] in ("analyzer", "generator", "tools")], \
        "imports by an old top-level name"
    if module.startswith("chat_autoparser.integrations"):  # adapters stand beside the CLIs, not on them
        assert not [t for _, t in _imports(path, module) if _layer(t) == LAYERS.index("chat_autoparser.tools")]
