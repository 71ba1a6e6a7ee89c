"""The analysis works by analysis alone: no code path names a model or matches text that only
some templates write. This test collects from the corpus every marker-shaped literal, every
family name, the other literal fragments of the templates and the content-block types they
test for, then reads every string our code builds (constants, escaped or concatenated, not
docstrings or comments, which may cite examples) and every identifier, and fails on any hit:

- a corpus marker (``<|im_start|>``) in a string;
- a family name in a string or an identifier, as a word or the word part of one (``qwen3``,
  ``Llama4Parser``, ``glm``);
- a fragment that only the templates of one or two families write (``to=functions.``);
- a content block whose ``"type"`` is not the chat API's (``{"content": [{"type": "thoughts"}]}``);
- a list of words the code matches markers or variables with, one of which is not the API's
  and names the markers of at most two families (``"inner"``, ``"scratch"``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import pytest

from chat_autoparser.analyzer.corpus import CorpusEntry
from chat_autoparser.analyzer.markers import markers_in
from chat_autoparser.analyzer.template_info import template_info

REPO = Path(__file__).resolve().parents[1]
CODE_DIRS = ("chat_autoparser", "analyzer", "generator", "tools", "integrations")
# The bos/eos stand-ins for a bare .jinja (analyzer/load.py STAND_IN_TOKENS) are render
# inputs, not markers the analysis looks for.
ALLOWED_MARKERS = {("analyzer/load.py", "<s>"), ("analyzer/load.py", "</s>")}
# The corpus fetcher must name its data source (the llama-cpp-python sdist and its paths); the
# grammar checker drives llama.cpp through its own API (``llama_backend_init``, ...).
DATA_SOURCE_FILES = {"analyzer/corpus.py", "tools/fetch_corpus.py"}
ENGINE_FILES = {"generator/verify/engines.py"}
# Manifest "families" that are plain English words or format names, not model names.
NOT_MODEL_NAMES = {"family", "chatml", "alpaca", "spark", "dots", "intel", "salesforce", "microsoft", "nvidia",
                   "tencent", "allenai", "openai", "step"}
# Names of software we check against (grammar engines, the renderer we match), which contain a
# family word: removed from a string before its words are looked at.
TOOL_NAMES = re.compile(r"llama[._-]?cpp(?:[._-]python)?", re.IGNORECASE)
# Content-block and schema types of the chat API (OpenAI, Anthropic) and JSON Schema: the
# only block types code may write.
API_TYPES = {"text", "image", "image_url", "input_audio", "audio", "video", "file", "refusal", "thinking",
             "redacted_thinking", "tool_use", "tool_result", "function", "json_schema", "json_object",
             "object", "array", "string", "number", "integer", "boolean", "null"}
# The chat API's own words for reasoning and answers (``reasoning_content``,
# ``reasoning_effort``, ``enable_thinking``, ``thinking`` blocks, ``content``, ``text``):
# word lists may hold them however few templates' markers do.
API_WORDS = {"think", "reason", "effort", "content", "text"}
# A fragment this long, with a letter and a punctuation mark, written by at most this share of
# the templates, is some families' text; a word only this many families' markers hold, theirs.
FRAGMENT_MIN_LEN = 8
FEW_TEMPLATES = 0.03
FEW_FAMILIES = 2
# Fragments of a standard syntax, not of a template's: why each may stand in code.
GENERIC_SYNTAX = {
    "<![CDATA[": "XML's own quoting of a value (an argument encoding the analysis recognises)",
    '{"schema":': "the first key of the report baseline's own JSON (tools/template_report.py)",
}


# --------------------------------------------------------------------------- reading our code

def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _folded(node: ast.AST) -> str | None:
    """The string an expression of constants builds: ``"<|im_" + "start|>"``, ``"".join([...])``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
        sep, items = _folded(node.func.value), [_folded(e) for e in node.args[0].elts]
        return sep.join(items) if sep is not None and None not in items else None
    return None


def _variants(s: str) -> list[str]:
    """A string as written, and with regex/escape backslashes removed (``<\\|im_start\\|>``)."""
    plain = re.sub(r"\\(.)", r"\1", s)
    return [s] if plain == s else [s, plain]


def code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string the module's code holds or builds from constants."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    out = []
    for n in ast.walk(tree):
        if id(n) in skip or not isinstance(n, (ast.Constant, ast.BinOp, ast.Call)):
            continue
        s = _folded(n)
        if s is not None:
            out += [(n.lineno, v) for v in _variants(s)]
    return out


def identifiers(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every name the module defines, binds or reads."""
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([n.id] if isinstance(n, ast.Name) else [n.attr] if isinstance(n, ast.Attribute) else
                 [n.name] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                 [n.arg] if isinstance(n, ast.arg) else [n.arg] if isinstance(n, ast.keyword) and n.arg else
                 [n.name, n.asname or ""] if isinstance(n, ast.alias) else [])
        out += [(getattr(n, "lineno", 0), name) for name in names if name]
    return out


# Functions that look for words in markers (analyzer/markers.py, analyzer/reasoning.py).
WORD_MATCHERS = {"mentions", "adjacent_pairs"}


def _words(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return tuple(e.value for e in node.elts)
    return None


def word_lists(root: Path = REPO) -> list[tuple[str, int, tuple[str, ...]]]:
    """(file, line, words) of every word list the code matches markers or variable names with:
    a constant named ``*_WORDS``, or a list (or the constant naming it) handed to a matcher."""
    constants: dict[str, tuple[str, int, tuple[str, ...]]] = {}
    handed: list[tuple[str, ast.AST]] = []
    for rel, path in code_files(root):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and (words := _words(n.value)) is not None:
                constants[n.targets[0].id] = (rel, n.lineno, words)
            if isinstance(n, ast.Call):
                func = n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                if func in WORD_MATCHERS:
                    handed += [(rel, a) for a in n.args]
    found = {name: entry for name, entry in constants.items() if name.endswith("_WORDS")}
    for rel, arg in handed:
        name = arg.id if isinstance(arg, ast.Name) else getattr(arg, "attr", None)
        if name in constants:
            found[name] = constants[name]
        elif (words := _words(arg)) is not None:
            found[f"{rel}:{arg.lineno}"] = (rel, arg.lineno, words)
    return sorted(set(found.values()))


def _blocks_in(node: ast.AST) -> Iterator[ast.Dict]:
    """The dict displays inside a message content display (a list of blocks, or a mapping of them)."""
    if isinstance(node, ast.Dict):
        yield node
        for v in node.values:
            yield from _blocks_in(v)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from _blocks_in(e)


def block_types(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every ``"type": "<constant>"`` of a block in a ``"content"`` display."""
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(n, ast.Dict):
            continue
        for key, content in zip(n.keys, n.values):
            if not (isinstance(key, ast.Constant) and key.value == "content"):
                continue
            for block in _blocks_in(content):
                for k, v in zip(block.keys, block.values):
                    if isinstance(k, ast.Constant) and k.value == "type" and isinstance(v, ast.Constant) \
                            and isinstance(v.value, str):
                        out.append((block.lineno, v.value))
    return sorted(set(out))


def code_files(root: Path = REPO) -> Iterator[tuple[str, Path]]:
    for d in CODE_DIRS:
        for path in sorted((root / d).rglob("*.py")):
            yield str(path.relative_to(root)), path


def word_runs(text: str) -> list[str]:
    """The lowercase letter runs of ``text``, camel case split: ``Qwen3Parser`` → qwen, parser."""
    return re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", TOOL_NAMES.sub(" ", text)).lower())


def _has_run(runs: list[str], name: list[str]) -> bool:
    return any(runs[i:i + len(name)] == name for i in range(len(runs) - len(name) + 1))


# --------------------------------------------------------------------------- the corpus side

@lru_cache(maxsize=2)
def _corpus_facts(entries: tuple[CorpusEntry, ...]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """(every marker in the templates' literals with the families writing it, the literal text
    of each template). Literals are joined as the source orders them: ``"to=" }}{{ "functions."``
    writes one fragment."""
    markers: dict[str, set[str]] = {}
    per_template: dict[str, str] = {}
    for entry in entries:
        try:
            literals = template_info(entry.path.read_text(encoding="utf-8")).literals
        except Exception:  # a template jinja2 cannot parse has no literals to take
            continue
        for lit in literals:
            for m in markers_in(lit):
                markers.setdefault(m, set()).add(entry.family.lower())
        per_template[entry.name] = "".join(literals)
    return markers, per_template


def _templates_writing(fragment: str, templates: dict[str, str]) -> list[str]:
    return [name for name, text in templates.items() if fragment in text]


# A marker that is a name alone (``<|inner_prefix|>``, ``[THINK]``), not one with attributes.
_NAME_MARKER = re.compile(r"[<\[][|｜/]*[A-Za-z_][\w:\-]*[|｜]*[>\]]")


def _marker_families(markers: dict[str, set[str]], word: str) -> set[str]:
    """The families whose templates write a marker with ``word`` in its name."""
    return {f for m, fams in markers.items() if _NAME_MARKER.fullmatch(m) and any(word in r for r in word_runs(m))
            for f in fams}


def _family_names(corpus: list[CorpusEntry]) -> dict[str, list[str]]:
    names = {e.family.lower() for e in corpus} - NOT_MODEL_NAMES
    return {f: runs for f in names if (runs := word_runs(f)) and max(map(len, runs)) >= 2}


# --------------------------------------------------------------------------- the checks

def find_corpus_markers(markers: dict[str, set[str]], root: Path = REPO) -> list[str]:
    return [f"{rel}:{line}: {m!r}" for rel, path in code_files(root) for line, s in code_strings(path)
            for m in markers_in(s) if m in markers and (rel, m) not in ALLOWED_MARKERS]


def find_family_names(families: dict[str, list[str]], root: Path = REPO) -> list[str]:
    hits = []
    for rel, path in code_files(root):
        if rel in DATA_SOURCE_FILES | ENGINE_FILES:
            continue
        texts = [("string", line, s) for line, s in code_strings(path)]
        texts += [("name", line, s) for line, s in identifiers(path)]
        for what, line, s in texts:
            runs = word_runs(s)
            hits += [f"{rel}:{line}: {f!r} in {what} {s[:60]!r}" for f, name in families.items() if _has_run(runs, name)]
    return sorted(set(hits))


def find_family_fragments(templates: dict[str, str], root: Path = REPO) -> list[str]:
    hits = []
    for rel, path in code_files(root):
        for line, s in code_strings(path):
            frag = s.strip()
            if len(frag) < FRAGMENT_MIN_LEN or not re.search(r"[A-Za-z]", frag) \
                    or not re.search(r"[=.:<>|\[\]/]", frag) or "\n" in frag:
                continue
            if frag in GENERIC_SYNTAX:
                continue
            if 1 <= len(names := _templates_writing(frag, templates)) <= len(templates) * FEW_TEMPLATES:
                hits.append(f"{rel}:{line}: {frag!r} written only by {len(names)} templates ({names[0]}, ...)")
    return hits


def find_block_types(root: Path = REPO) -> list[str]:
    return [f"{rel}:{line}: {{'type': {t!r}}}" for rel, path in code_files(root)
            for line, t in block_types(path) if t not in API_TYPES]


def find_family_words(markers: dict[str, set[str]], root: Path = REPO) -> list[str]:
    hits = []
    for rel, line, words in word_lists(root):
        for w in words:
            if w not in API_WORDS and len(fams := _marker_families(markers, w)) <= FEW_FAMILIES:
                hits.append(f"{rel}:{line}: {w!r} of {words} names only {sorted(fams)}' markers")
    return hits


@pytest.fixture(scope="module")
def facts(corpus: list[CorpusEntry]) -> tuple[dict[str, set[str]], dict[str, str]]:
    markers, templates = _corpus_facts(tuple(corpus))
    assert len(markers) > 200, "corpus markers were not collected"
    assert len(templates) > 600, "template texts were not collected"
    return markers, templates


def test_no_corpus_marker_in_code(facts):
    hits = find_corpus_markers(facts[0])
    assert not hits, "model-specific markers in code:\n" + "\n".join(hits)


def test_no_model_name_in_code(corpus: list[CorpusEntry]):
    families = _family_names(corpus)
    assert len(families) > 50 and {"glm", "phi"} <= set(families)
    hits = find_family_names(families)
    assert not hits, "model names in code:\n" + "\n".join(hits)


def test_no_family_fragment_in_code(facts):
    hits = find_family_fragments(facts[1])
    assert not hits, "text only some families' templates write, in code:\n" + "\n".join(hits)


def test_no_family_block_type_in_code():
    hits = find_block_types()
    assert not hits, "content-block types that are not the API's, in code:\n" + "\n".join(hits)


def test_no_family_word_list_in_code(facts):
    hits = find_family_words(facts[0])
    assert not hits, "word lists with words only some families use:\n" + "\n".join(hits)


# --------------------------------------------------------------------------- the checks can fail

def test_checks_see_hidden_literals(tmp_path: Path, corpus: list[CorpusEntry]):
    """Escaped, concatenated and short literals, family names inside identifiers, one family's
    fragment, block type and word: each check finds the kind its name promises."""
    markers, templates = _corpus_facts(tuple(corpus))
    gen = tmp_path / "generator"
    gen.mkdir()
    (gen / "bad.py").write_text(
        'A = "<" + "|im_start|>"\n'
        'B = r"<\\|im_end\\|>"\n'
        'C = "".join(["<|", "im_start", "|>"])\n'
        'def qwen3_parser(glm): return "Llama4"\n'
        'D = "to=functions."\n'
        'E = {"content": {"blocks": [{"type": "thoughts", "text": ""}]}}\n'
        'F = mentions(marker, ("think", "scratch", "inner"))\n', encoding="utf-8")
    found = find_corpus_markers(markers, tmp_path)
    assert {"'<|im_start|>'", "'<|im_end|>'"} <= {h.split(": ", 1)[1] for h in found} and len(found) >= 3
    names = find_family_names(_family_names(corpus), tmp_path)
    assert all(any(f"{n!r} in" in h for h in names) for n in ("qwen", "glm", "llama"))
    assert any("to=functions." in h for h in find_family_fragments(templates, tmp_path))
    assert find_block_types(tmp_path) == ["generator/bad.py:6: {'type': 'thoughts'}"]
    assert {h.split(" of ")[0] for h in find_family_words(markers, tmp_path)} == {
        "generator/bad.py:7: 'scratch'", "generator/bad.py:7: 'inner'"}
