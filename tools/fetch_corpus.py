"""``fetch-corpus``: fetch the chat-template corpus from pinned PyPI packages into the user cache.

It downloads the llama-cpp-python 0.3.36 sdist once (pinned by sha256) and takes llama.cpp's
70 templates (``vendor/llama.cpp/models/templates/*.jinja``) and its test vocabularies
(``vendor/llama.cpp/models/ggml-vocab-*.gguf``), then rebuilds the other templates of the
pinned manifest (``templates/corpus-manifest.tsv``, shipped in the package) from the packages
its ``source`` column names, checking every file against the manifest's sha256: everything
the tests and ``template-report --corpus`` read. ``--llama-cpp-only`` stops after the first
step. The tests call :func:`ensure_corpus`, which fetches only when no corpus is found.

Cache layout (``$XDG_CACHE_HOME/chat-autoparser`` or ``~/.cache/chat-autoparser``)::

    downloads/<package>-<version>.sdist|.wheel   the archives, kept so later runs need no network
    corpus/llama.cpp/*.jinja, corpus/extra/*.jinja, corpus/MANIFEST.tsv
    vocab/ggml-vocab-*.gguf, vocab/SHA256SUMS

Exit codes: 0 ok, 1 some files missing, 2 bad input, network error or sha256 mismatch.

Example::

    $ fetch-corpus                      # all 720 templates, ~130 MB once; later runs use the cache
    $ fetch-corpus --verify             # re-hash what is cached, repair what changed
    $ AUTOPARSER_CORPUS=/tmp/c/corpus fetch-corpus --cache-dir /tmp/c
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.error import HTTPError, URLError
from urllib.parse import urljoin
from urllib.request import Request, urlopen

from chat_autoparser.analyzer.corpus import (
    ENV_VAR,
    MANIFEST_COLUMNS,
    MANIFEST_NAME,
    CorpusError,
    ManifestRow,
    cache_root,
    corpus_dir,
    file_sha256,
    read_manifest,
)

from chat_autoparser.errors import FetchError

from . import shipped

EXIT_OK, EXIT_MISSING, EXIT_ERROR = 0, 1, 2

PYPI_URL = "https://pypi.org/pypi"
PINNED_MANIFEST = shipped("corpus-manifest.tsv")
TEMPLATES_IN_SDIST = "vendor/llama.cpp/models/templates/"
VOCAB_IN_SDIST = "vendor/llama.cpp/models/"
VOCAB_SUMS = "SHA256SUMS"
CHUNK = 1 << 20
TIMEOUT_S = 60
USER_AGENT = "chat-autoparser-fetch-corpus"
# `pypi:<package>==<version> <sdist|wheel>:<path inside the archive>[ (note)]`
SOURCE_RE = re.compile(r"pypi:(?P<package>[A-Za-z0-9._-]+)==(?P<version>\S+) (?P<kind>sdist|wheel):(?P<member>\S+)")


@dataclass(frozen=True, slots=True)
class Release:
    """One file of one PyPI release: its sdist or its wheel."""

    package: str
    version: str
    kind: str  # "sdist" | "wheel"

    @property
    def cache_name(self) -> str:
        return f"{self.package}-{self.version}.{self.kind}"

    def __str__(self) -> str:
        return f"{self.package}=={self.version} {self.kind}"


# The trust anchor of the default corpus: the sdist's bytes, pinned.
LLAMA_CPP = Release("llama-cpp-python", "0.3.36", "sdist")
LLAMA_CPP_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"


@dataclass
class Run:
    """Options and tallies of one run (mutable: it counts as the run goes)."""

    cache: Path
    offline: bool = False
    pypi_url: str = PYPI_URL
    pins: dict[Release, str] = field(default_factory=lambda: {LLAMA_CPP: LLAMA_CPP_SHA256})
    errors: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    downloaded_bytes: int = 0
    written: int = 0

    @property
    def corpus(self) -> Path:
        return self.cache / "corpus"

    @property
    def vocab(self) -> Path:
        return self.cache / "vocab"

    @property
    def downloads(self) -> Path:
        return self.cache / "downloads"

    def error(self, message: str) -> None:
        """Bad input, network or sha256 trouble: one line on stderr, exit code 2."""
        print(f"error: {message}", file=sys.stderr)
        self.errors.append(message)

    def lack(self, name: str, reason: str) -> None:
        """A file that could not be rebuilt: one line on stderr, exit code 1 (unless worse)."""
        print(f"missing: {name}: {reason}", file=sys.stderr)
        self.missing.append(name)

    def exit_code(self) -> int:
        return EXIT_ERROR if self.errors else EXIT_MISSING if self.missing else EXIT_OK


# --- sources ------------------------------------------------------------------------------------

def parse_source(source: str) -> tuple[Release, str] | None:
    """The release and archive member a manifest ``source`` names, or ``None`` if it names none.

    Example::

        >>> parse_source("pypi:trl==1.16.0 sdist:trl/chat_templates/cohere.jinja")
        (Release(package='trl', version='1.16.0', kind='sdist'), 'trl/chat_templates/cohere.jinja')
    """
    m = SOURCE_RE.match(source)
    if not m:
        return None
    return Release(m["package"], m["version"], m["kind"]), m["member"]


# --- network ------------------------------------------------------------------------------------

def _open_url(url: str) -> BinaryIO:
    """GET ``url`` (tests replace this function to stay off the network)."""
    return urlopen(Request(url, headers={"User-Agent": USER_AGENT}), timeout=TIMEOUT_S)


def _get_json(run: Run, url: str) -> Any:
    try:
        with _open_url(url) as response:
            body = response.read()
    except HTTPError:
        raise  # the caller tells "not found" apart
    except (URLError, OSError, ValueError) as e:
        raise FetchError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from e
    run.downloaded_bytes += len(body)
    try:
        return json.loads(body)
    except ValueError as e:
        raise FetchError(f"{url} did not return JSON: {e}") from e


def release_file(run: Run, release: Release) -> tuple[str, str]:
    """URL and PyPI's sha256 of a release's sdist or (preferably pure-Python) wheel.

    Example::

        >>> release_file(Run(cache_root()), LLAMA_CPP)[0].rsplit("/", 1)[-1]
        'llama_cpp_python-0.3.36.tar.gz'
    """
    base = f"{run.pypi_url.rstrip('/')}/{release.package}"
    document = f"{base}/{release.version}/json"
    try:
        files = _get_json(run, document)["urls"]
    except HTTPError as e:
        if e.code != 404:
            raise FetchError(f"{document}: HTTP {e.code}") from e
        # Some mirrors and proxies serve only the project-level document; it lists every release.
        document = f"{base}/json"
        try:
            files = _get_json(run, document).get("releases", {}).get(release.version, [])
        except HTTPError as e2:
            raise FetchError(f"{document}: HTTP {e2.code} (is {release.package} on this index?)") from e2
    wanted = "sdist" if release.kind == "sdist" else "bdist_wheel"
    candidates = [f for f in files if f.get("packagetype") == wanted]
    # Several wheels: the templates are the same in each, so take the smallest download.
    candidates.sort(key=lambda f: (not f["filename"].endswith("-none-any.whl"), f.get("size", 0)))
    if not candidates:
        raise FetchError(f"{release}: PyPI lists no such file for this release")
    # Mirrors may give file URLs relative to the JSON document.
    return urljoin(document, candidates[0]["url"]), candidates[0].get("digests", {}).get("sha256", "")


def download(run: Run, release: Release, dest: Path, expected_sha256: str) -> None:
    """Download ``release`` to ``dest``; refuse (and keep nothing) unless its sha256 is ``expected_sha256``."""
    url, registry_sha256 = release_file(run, release)
    expected = expected_sha256 or registry_sha256
    if registry_sha256 and expected != registry_sha256:
        # Refuse before spending the bandwidth: the index serves other bytes than we pinned.
        raise FetchError(f"{release}: PyPI lists sha256 {registry_sha256}, pinned is {expected}; refusing")
    print(f"downloading {release} from {url}", flush=True)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    try:
        with _open_url(url) as response, part.open("wb") as out:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                run.downloaded_bytes += len(chunk)
    except (URLError, OSError, ValueError) as e:  # ValueError: a malformed URL
        part.unlink(missing_ok=True)
        raise FetchError(f"{release}: download from {url} failed: {getattr(e, 'reason', e)}") from e
    if expected and digest.hexdigest() != expected:
        part.unlink()
        raise FetchError(f"{release}: downloaded sha256 {digest.hexdigest()} != expected {expected}; refusing")
    os.replace(part, dest)


def obtain(run: Run, release: Release) -> Path:
    """The cached archive of ``release``, downloaded first if needed (never with ``--offline``).

    A pinned release is re-hashed on every use: a cached file can be replaced or damaged.
    """
    path = run.downloads / release.cache_name
    pinned = run.pins.get(release, "")
    if path.is_file():
        if pinned and (actual := file_sha256(path)) != pinned:
            path.unlink()
            raise FetchError(f"{path}: sha256 {actual} != pinned {pinned} for {release}; "
                             f"refusing it (removed; run again to download it afresh)")
        return path
    if run.offline:
        raise FetchError(f"{release} is not in {run.downloads} and --offline forbids downloading it")
    download(run, release, path, pinned)
    return path


# --- archives -----------------------------------------------------------------------------------

def iter_members(archive: Path, kind: str, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """``(path, bytes)`` of the wanted regular files, in one forward pass over the archive.

    Sdist paths lose their top folder (``llama_cpp_python-0.3.36/``), so they read like the
    manifest's. Nothing is extracted by the archive's own names: callers choose where bytes go.
    """
    try:
        yield from (_wheel_members if kind == "wheel" else _sdist_members)(archive, wanted)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as e:
        raise FetchError(f"{archive}: not a readable {kind}: {e}") from e


def _wheel_members(archive: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not info.is_dir() and wanted(info.filename):
                yield info.filename, zf.read(info)


def _sdist_members(archive: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    # Stream mode: a single pass over the gzip stream instead of seeking back per member.
    with tarfile.open(archive, "r|*") as tf:
        for info in tf:
            path = info.name.split("/", 1)[1] if "/" in info.name else ""
            if info.isfile() and wanted(path) and (f := tf.extractfile(info)) is not None:
                yield path, f.read()


def python_literals(source: bytes) -> dict[str, bytes]:
    """UTF-8 bytes of every string literal in a Python file, keyed by sha256.

    Example::

        >>> list(python_literals(b'T = "{{ x }}"').values())
        [b'{{ x }}']
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        raise FetchError(f"not a readable Python file: {e}") from e
    literals = (node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return {hashlib.sha256(b).hexdigest(): b for b in (s.encode("utf-8") for s in literals)}


# --- writing ------------------------------------------------------------------------------------

def _write(path: Path, data: bytes) -> None:
    """Write atomically, so an interrupted run never leaves a half file under the final name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def write_manifest(corpus: Path, rows: Iterable[ManifestRow]) -> None:
    lines = ["\t".join(MANIFEST_COLUMNS)] + ["\t".join(_cells(r)) for r in rows]
    _write(corpus / MANIFEST_NAME, ("\n".join(lines) + "\n").encode("utf-8"))


def _cells(row: ManifestRow) -> list[str]:
    return [getattr(row, c) for c in MANIFEST_COLUMNS]


def cached_rows(corpus: Path) -> dict[str, ManifestRow]:
    """The rows of the cache's own manifest (empty when there is none yet)."""
    path = corpus / MANIFEST_NAME
    return {r.file: r for r in read_manifest(path)} if path.is_file() else {}


def read_sums(vocab: Path) -> dict[str, str]:
    """``name -> sha256`` from ``vocab/SHA256SUMS`` (``sha256sum`` format)."""
    path = vocab / VOCAB_SUMS
    if not path.is_file():
        return {}
    pairs = (line.split("  ", 1) for line in path.read_text(encoding="utf-8").splitlines() if "  " in line)
    return {name: sha for sha, name in pairs}


# --- the default corpus: llama.cpp's templates and vocabularies -----------------------------------

def _is_template(path: str) -> bool:
    rest = path.removeprefix(TEMPLATES_IN_SDIST)
    return rest != path and "/" not in rest and rest.endswith(".jinja")


def _is_vocab(path: str) -> bool:
    rest = path.removeprefix(VOCAB_IN_SDIST)
    return rest != path and "/" not in rest and rest.startswith("ggml-vocab-") and rest.endswith(".gguf")


def extract_default(run: Run, archive: Path, pinned: dict[str, ManifestRow],
                    release: Release = LLAMA_CPP) -> list[ManifestRow]:
    """Write llama.cpp's templates to ``corpus/llama.cpp/`` and vocabularies to ``vocab/``.

    Returns the manifest rows of the templates: the pinned row when the bytes match it, else
    one made from the file (family and flags unknown).

    Example::

        >>> rows = extract_default(Run(Path("/tmp/c")), Path("/tmp/c/downloads/llama-cpp-python-0.3.36.sdist"), {})
        >>> rows[0].file
        'llama.cpp/Apertus-8B-Instruct.jinja'
    """
    rows, sums = [], {}
    for path, data in iter_members(archive, release.kind, lambda p: _is_template(p) or _is_vocab(p)):
        name = path.rsplit("/", 1)[-1]
        sha = hashlib.sha256(data).hexdigest()
        if _is_vocab(path):
            _write(run.vocab / name, data)
            sums[name] = sha
            continue
        row = _row_for(f"llama.cpp/{name}", sha, f"pypi:{release.package}=={release.version} {release.kind}:{path}",
                       pinned)
        _write(run.corpus / row.file, data)
        rows.append(row)
        run.written += 1
    if not rows:
        raise FetchError(f"{archive}: no {TEMPLATES_IN_SDIST}*.jinja inside; is this the right sdist?")
    _write(run.vocab / VOCAB_SUMS, "".join(f"{s}  {n}\n" for n, s in sorted(sums.items())).encode())
    return rows


def _row_for(file: str, sha: str, source: str, pinned: dict[str, ManifestRow]) -> ManifestRow:
    row = pinned.get(file)
    if row is not None and row.sha256 == sha:
        return row
    if row is not None:
        print(f"note: {file} differs from the pinned manifest (sha256 {sha}); listed with its own hash")
    return ManifestRow(file=file, sha256=sha, model_id=Path(file).stem, source=source, family="",
                       has_tools="", has_reasoning="")


def default_complete(run: Run) -> bool:
    """Whether an earlier run left the default corpus and vocabularies in place (no network needed)."""
    templates = [f for f in cached_rows(run.corpus) if f.startswith("llama.cpp/")]
    vocab = read_sums(run.vocab)
    return bool(templates and vocab) and all((run.corpus / f).is_file() for f in templates) \
        and all((run.vocab / n).is_file() for n in vocab)


# --- the full corpus: every pinned row, from its own package --------------------------------------

def rebuild(run: Run, archive: Path, release: Release, rows: list[tuple[ManifestRow, str]]) -> list[ManifestRow]:
    """Write each row's file from its ``archive`` member when the bytes match the row's sha256; report the rest.

    A member that is a Python file holds the template as a string literal (unsloth keeps them
    so); the literal is found by the row's sha256.
    """
    found = dict(iter_members(archive, release.kind, {member for _, member in rows}.__contains__))
    literals = {m: python_literals(data) for m, data in found.items() if m.endswith(".py")}
    done = []
    for row, member in rows:
        data = literals[member].get(row.sha256) if member in literals else found.get(member)
        if data is None:
            run.lack(row.file, f"{member} not found in {release}" if member not in found
                     else f"no string literal in {member} has sha256 {row.sha256}")
        elif (sha := hashlib.sha256(data).hexdigest()) != row.sha256:
            run.lack(row.file, f"{member} in {release} has sha256 {sha}, the manifest pins {row.sha256}")
        else:
            _write(run.corpus / row.file, data)
            run.written += 1
            done.append(row)
    return done


def rebuild_missing(run: Run, pinned: list[ManifestRow]) -> list[ManifestRow]:
    """Rebuild every pinned row whose file is not in the cache, one archive at a time."""
    groups: dict[Release, list[tuple[ManifestRow, str]]] = {}
    for row in pinned:
        if (run.corpus / row.file).is_file():
            continue
        parsed = parse_source(row.source)
        if parsed is None:
            run.lack(row.file, f"source {row.source!r} names no PyPI archive")
            continue
        release, member = parsed
        groups.setdefault(release, []).append((row, member))
    done = []
    for release, rows in groups.items():
        try:
            done += rebuild(run, obtain(run, release), release, rows)
        except FetchError as e:
            run.error(str(e))
            for row, _ in rows:
                run.lack(row.file, f"{release} unavailable")
    return done


# --- verification -------------------------------------------------------------------------------

def drop_corrupt(run: Run) -> None:
    """Re-hash every cached file; remove the ones that changed so this run extracts them again."""
    checks = [(run.corpus / f, r.sha256) for f, r in cached_rows(run.corpus).items()]
    checks += [(run.vocab / n, s) for n, s in read_sums(run.vocab).items()]
    bad = 0
    for path, sha in checks:
        if path.is_file() and file_sha256(path) != sha:
            print(f"repairing: {path} does not match its recorded sha256; extracting it again")
            path.unlink()
            bad += 1
    print(f"verified {len(checks)} cached files, {bad} changed")


# --- command line -------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fetch-corpus", description=(
        "Fetch the chat-template corpus (test data) from pinned PyPI packages into the user cache: every "
        "template of the pinned manifest and llama.cpp's test vocabularies."))
    p.add_argument("--llama-cpp-only", action="store_true",
                   help="only llama.cpp's 70 templates and test vocabularies (the llama-cpp-python 0.3.36 sdist)")
    p.add_argument("--full", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old scripts
    p.add_argument("--cache-dir", type=Path, help=f"cache folder (default: {cache_root()})")
    p.add_argument("--offline", action="store_true",
                   help="use only cached downloads; fail (exit 2) when one is needed and not cached")
    p.add_argument("--verify", action="store_true", help="re-hash cached files and re-extract changed ones")
    p.add_argument("--manifest", type=Path, default=PINNED_MANIFEST, help="pinned manifest (default: %(default)s)")
    p.add_argument("--pypi-url", default=PYPI_URL, help="PyPI JSON API base (default: %(default)s)")
    return p


def _load_pinned(run: Run, path: Path, required: bool) -> list[ManifestRow]:
    """The pinned manifest; without it the default corpus still works, only unlabelled."""
    if not path.is_file():
        if required:
            run.error(f"pinned manifest {path} not found; pass --manifest (it is in the repository's templates/)")
        else:
            print(f"note: pinned manifest {path} not found; families and flags will be empty")
        return []
    try:
        return read_manifest(path)
    except CorpusError as e:
        run.error(str(e))
        return []


def fetch(run: Run, *, full: bool, verify: bool, manifest: Path) -> int:
    """One run: repair, the default corpus, then (``full``) the rest; the cache's manifest last.

    Returns how many templates the cache's manifest lists afterwards.
    """
    pinned = _load_pinned(run, manifest, required=full)
    if run.errors:
        return 0
    rows = cached_rows(run.corpus)
    if verify:
        drop_corrupt(run)
    if not default_complete(run):
        try:
            archive = obtain(run, LLAMA_CPP)
            rows.update((r.file, r) for r in extract_default(run, archive, {r.file: r for r in pinned}))
        except FetchError as e:
            run.error(str(e))
    if full and not run.errors:
        rows.update((r.file, r) for r in rebuild_missing(run, pinned))
    present = [r for r in rows.values() if (run.corpus / r.file).is_file()]
    for file in rows.keys() - {r.file for r in present}:
        run.lack(file, "was in the cache but is gone" + ("" if full else "; `fetch-corpus` restores it"))
    if present:
        order = {r.file: i for i, r in enumerate(pinned)}
        write_manifest(run.corpus, sorted(present, key=lambda r: (order.get(r.file, len(order)), r.file)))
    return len(present)


def cache_complete(run: Run, pinned: Iterable[ManifestRow]) -> bool:
    """Whether the cache holds every pinned template and the vocabularies (files present; hashes
    are checked by ``--verify``)."""
    cached = cached_rows(run.corpus)
    return default_complete(run) and all(r.file in cached and (run.corpus / r.file).is_file() for r in pinned)


def ensure_corpus(*, progress: Callable[[str], None] = print) -> Path:
    """The corpus folder the tests and ``template-report --corpus`` read, fetched first if needed.

    ``$AUTOPARSER_CORPUS`` or ``../shared/corpus`` are used as they are when present (see
    :func:`chat_autoparser.analyzer.corpus.corpus_dir`); otherwise the user cache, which is filled (all of
    the pinned manifest, once) when it lacks anything. ``progress`` receives one line before
    a fetch and one after it. A fetch that fails raises :class:`CorpusError`.

    Example::

        >>> (ensure_corpus(progress=lambda line: None) / "MANIFEST.tsv").is_file()
        True
    """
    run = Run(cache=cache_root())
    if os.environ.get(ENV_VAR):
        return corpus_dir()  # an explicit setting is used as it is (an error when it is no folder)
    try:
        found = corpus_dir()
    except CorpusError:
        found = None
    pinned = read_manifest(PINNED_MANIFEST)
    if found is not None and (found.resolve() != run.corpus.resolve() or cache_complete(run, pinned)):
        return found
    progress(f"chat-autoparser: fetching the pinned template corpus ({len(pinned)} templates, about 130 MB of "
             f"PyPI archives, once) into {run.cache}; later runs read the cache")
    started = time.monotonic()
    templates = fetch(run, full=True, verify=False, manifest=PINNED_MANIFEST)
    if run.errors or run.missing or not cache_complete(run, pinned):
        problems = run.errors + [f"missing {name}" for name in run.missing]
        raise CorpusError(f"fetching the corpus into {run.cache} failed: {'; '.join(problems[:3]) or 'incomplete'}; "
                          f"run `fetch-corpus` to see every message, or set ${ENV_VAR} to a corpus folder")
    progress(f"chat-autoparser: {templates} templates in {run.corpus} "
             f"({run.downloaded_bytes / 1e6:.0f} MB downloaded in {time.monotonic() - started:.0f} s)")
    return run.corpus


def _summary(run: Run, templates: int, seconds: float) -> None:
    vocab = len(read_sums(run.vocab))
    print(f"corpus: {templates} templates in {run.corpus} ({run.written} written this run); "
          f"vocab: {vocab} files in {run.vocab}")
    print(f"downloaded {run.downloaded_bytes / 1e6:.1f} MB in {seconds:.1f} s; "
          f"{len(run.missing)} files missing, {len(run.errors)} errors")
    try:
        chosen = corpus_dir()
    except CorpusError:
        chosen = None
    if templates and chosen is not None and chosen.resolve() != run.corpus.resolve():
        print(f"note: the tests read {chosen}; set {ENV_VAR}={run.corpus} to use this one")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fetch-corpus``; returns the exit code.

    Example::

        >>> main(["--cache-dir", "/tmp/autoparser-cache", "--offline"])
        2
    """
    args = _parser().parse_args(argv)
    run = Run(cache=(args.cache_dir or cache_root()).expanduser().resolve(), offline=args.offline,
              pypi_url=args.pypi_url)
    started, templates = time.monotonic(), 0
    try:
        templates = fetch(run, full=not args.llama_cpp_only, verify=args.verify, manifest=args.manifest)
    except (CorpusError, OSError) as e:
        run.error(str(e))
    _summary(run, templates, time.monotonic() - started)
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
