"""Find and list the external chat-template corpus (test data, never shipped with the project).

The corpus is a folder of real ``.jinja`` templates with a ``MANIFEST.tsv``. It is looked up in
this order (first hit wins):

1. ``$AUTOPARSER_CORPUS`` (an error if set but missing: an explicit setting is never ignored);
2. ``../shared/corpus`` beside the repository checkout (or beside the current directory, for
   the installed commands run from a checkout);
3. the user cache filled by ``fetch-corpus``: ``$XDG_CACHE_HOME/chat-autoparser/corpus``,
   else ``~/.cache/chat-autoparser/corpus``.

No corpus is a :class:`CorpusError` that says how to get one, never a silent skip. The tests
and ``template-report --corpus`` go through ``ensure_corpus`` (the fetcher's), which fills the
cache when this lookup finds nothing.

Example::

    >>> from chat_autoparser.analyzer.corpus import corpus_entries
    >>> entries = corpus_entries()
    >>> entries[0].name, entries[0].family
    ('llama.cpp/Apertus-8B-Instruct.jinja', 'apertus')
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import CorpusError

ENV_VAR = "AUTOPARSER_CORPUS"
MANIFEST_NAME = "MANIFEST.tsv"
CACHE_APP_NAME = "chat-autoparser"
FETCH_HINT = (f"run `fetch-corpus` (all 720 templates, about 130 MB of downloads once), or set ${ENV_VAR} "
              "to a corpus folder")


@dataclass(frozen=True, slots=True)
class ManifestRow:
    """One line of ``MANIFEST.tsv``, as text. Field order is the column order."""

    file: str
    sha256: str
    model_id: str
    source: str
    family: str
    has_tools: str
    has_reasoning: str


MANIFEST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ManifestRow))


@dataclass(frozen=True, slots=True)
class CorpusEntry:
    """One template of the corpus.

    ``name`` is the path relative to the corpus folder (``llama.cpp/Qwen3.5-4B.jinja``).
    Without a manifest ``family`` and ``model_id`` fall back to ``""`` and the file stem,
    ``sha256`` is ``""`` and the two flags are ``None`` (unknown).

    Example::

        >>> e = corpus_entries()[0]
        >>> e.verify()          # hashes this one file; raises CorpusError on a mismatch
        >>> text = e.path.read_text(encoding="utf-8")
    """

    path: Path
    name: str
    family: str
    model_id: str
    has_tools: bool | None
    has_reasoning: bool | None
    sha256: str

    def verify(self) -> None:
        """Check the file's bytes against the manifest's sha256 (only existence when none is recorded)."""
        if not self.path.is_file():
            raise CorpusError(f"{self.path}: listed in the corpus but missing; {FETCH_HINT}")
        if self.sha256 and (actual := file_sha256(self.path)) != self.sha256:
            raise CorpusError(f"{self.path}: sha256 {actual} does not match the manifest's {self.sha256}; "
                              f"the file was changed or corrupted: `fetch-corpus --verify` restores a fetched corpus")


def cache_root() -> Path:
    """The user cache folder of this project (``fetch-corpus`` writes ``corpus/`` and ``vocab/`` there).

    Example::

        >>> cache_root().name                   # ~/.cache/chat-autoparser, or under $XDG_CACHE_HOME
        'chat-autoparser'
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / CACHE_APP_NAME


def shared_corpus_dir() -> Path:
    """``../shared/corpus`` beside the repository checkout this module runs from, else beside the
    current directory (an installed package runs from site-packages); it may not exist."""
    beside_checkout = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
    if beside_checkout.is_dir():
        return beside_checkout
    return Path.cwd().resolve().parent / "shared" / "corpus"


def corpus_dir() -> Path:
    """The template corpus folder, found as the module docstring describes.

    Raises :class:`CorpusError` when none is found.

    Example::

        >>> (corpus_dir() / MANIFEST_NAME).is_file()
        True
    """
    explicit = os.environ.get(ENV_VAR, "")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_dir():
            raise CorpusError(f"${ENV_VAR} is {explicit!r}, which is not a folder; {FETCH_HINT}")
        return path
    shared = shared_corpus_dir()
    if shared.is_dir():
        return shared
    cached = cache_root() / "corpus"
    # fetch-corpus writes the manifest last, so without it the cache is incomplete.
    if (cached / MANIFEST_NAME).is_file():
        return cached
    raise CorpusError(f"no template corpus found (looked at ${ENV_VAR}, {shared}, {cached}); {FETCH_HINT}")


def vocab_dir() -> Path:
    """The folder of llama.cpp's test vocabularies (``ggml-vocab-*.gguf``) fetched by ``fetch-corpus``.

    ``fetch-corpus`` puts ``vocab/`` beside ``corpus/``, so that sibling is tried first (it follows
    ``$AUTOPARSER_CORPUS`` into a ``--cache-dir``), then the user cache.

    Example (after ``fetch-corpus``)::

        >>> sorted(p.name for p in vocab_dir().glob("*.gguf"))[:1]  # doctest: +SKIP
        ['ggml-vocab-aquila.gguf']
    """
    candidates = [cache_root() / "vocab"]
    try:
        candidates.insert(0, corpus_dir().parent / "vocab")
    except CorpusError:
        pass  # vocabularies can be present without a findable corpus
    for path in candidates:
        if any(path.glob("ggml-vocab-*.gguf")):
            return path
    raise CorpusError(f"no llama.cpp test vocabularies in {' or '.join(map(str, candidates))}; {FETCH_HINT}")


def read_manifest(path: Path) -> list[ManifestRow]:
    """Parse a ``MANIFEST.tsv`` (tab-separated, header line first, no quoting).

    Example::

        >>> rows = read_manifest(corpus_dir() / "MANIFEST.tsv")
        >>> rows[0].source.split()[0]
        'pypi:llama-cpp-python==0.3.36'
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise CorpusError(f"{path}: cannot read the manifest: {e.strerror or e}") from e
    if not lines or tuple(lines[0].split("\t")) != MANIFEST_COLUMNS:
        raise CorpusError(f"{path}:1: the header must be the columns {' '.join(MANIFEST_COLUMNS)}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(MANIFEST_COLUMNS):
            raise CorpusError(f"{path}:{number}: {len(cells)} columns, expected {len(MANIFEST_COLUMNS)}")
        row = ManifestRow(*cells)
        _check_row(row, path, number)
        rows.append(row)
    return rows


def _check_row(row: ManifestRow, path: Path, number: int) -> None:
    """Refuse rows that could point outside the corpus or carry malformed fields."""
    where = f"{path}:{number}"
    parts = Path(row.file).parts
    if not row.file or Path(row.file).is_absolute() or ".." in parts:
        raise CorpusError(f"{where}: file {row.file!r} must be a relative path inside the corpus")
    if len(row.sha256) != 64 or any(c not in "0123456789abcdef" for c in row.sha256):
        raise CorpusError(f"{where}: sha256 {row.sha256!r} is not 64 lower-case hex digits")
    for flag in (row.has_tools, row.has_reasoning):
        if flag not in ("yes", "no", ""):
            raise CorpusError(f"{where}: flag {flag!r} must be yes, no or empty")


def _flag(text: str) -> bool | None:
    return {"yes": True, "no": False}.get(text)


def corpus_entries(root: Path | None = None, *, verify: bool = False) -> list[CorpusEntry]:
    """The corpus's templates: from ``MANIFEST.tsv`` in its order when present, else ``**/*.jinja`` by name.

    Files are hashed only with ``verify=True`` (or one by one with :meth:`CorpusEntry.verify`).

    Example::

        >>> [e.name for e in corpus_entries() if e.family == "qwen" and e.has_tools][:1]
        ['llama.cpp/Qwen-QwQ-32B.jinja']
    """
    root = corpus_dir() if root is None else root
    manifest = root / MANIFEST_NAME
    if manifest.is_file():
        entries = [_entry_from_row(root, row) for row in read_manifest(manifest)]
        missing = [e.name for e in entries if not e.path.is_file()]
        if missing:
            raise CorpusError(f"{root}: {len(missing)} files listed in {MANIFEST_NAME} are missing "
                              f"(first: {missing[0]}); {FETCH_HINT}")
    else:
        entries = [CorpusEntry(path=p, name=p.relative_to(root).as_posix(), family="", model_id=p.stem,
                               has_tools=None, has_reasoning=None, sha256="")
                   for p in sorted(root.glob("**/*.jinja"))]
    if not entries:
        raise CorpusError(f"{root}: the corpus holds no templates; {FETCH_HINT}")
    if verify:
        for entry in entries:
            entry.verify()
    return entries


def _entry_from_row(root: Path, row: ManifestRow) -> CorpusEntry:
    return CorpusEntry(path=root / row.file, name=row.file, family=row.family, model_id=row.model_id,
                       has_tools=_flag(row.has_tools), has_reasoning=_flag(row.has_reasoning), sha256=row.sha256)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks (archives can be large).

    Example::

        >>> len(file_sha256(Path("templates/chatml-think.jinja")))
        64
    """
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
