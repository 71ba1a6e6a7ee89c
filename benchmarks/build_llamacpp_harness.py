"""Build the llama.cpp timing harness of ``benchmarks/analysis_speed.py --llama-cpp`` and print
its path.

Usage::

    python benchmarks/build_llamacpp_harness.py [--cache DIR] [--jobs N]
    python benchmarks/analysis_speed.py --llama-cpp "$(python benchmarks/build_llamacpp_harness.py)"

In the cache folder (default ``~/.cache/chat-autoparser/llamacpp-harness``) it downloads the
pinned llama-cpp-python sdist with pip (``pip download --no-binary :all: --no-deps
llama-cpp-python==0.3.36``; its sha256 is checked), unpacks its ``vendor/llama.cpp``, configures
``benchmarks/llamacpp_harness`` (``main.cpp``, ``CMakeLists.txt``) against it with cmake in
Release mode and builds the one executable (ggml, llama and llama-common linked in statically).
It needs pip, cmake and a C++17 compiler; nothing is installed.

The first run takes about ten minutes on two cores (a minute or two of it the download, where
pip prepares the sdist's metadata; the rest compiling ggml, llama and llama-common); a later run
reuses the download, the unpacked tree and the build, so it only recompiles what changed (the
harness' own sources) and takes seconds. Progress goes to stderr; stdout gets only the binary's
path.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS_SOURCE = ROOT / "benchmarks" / "llamacpp_harness"
PACKAGE, VERSION = "llama-cpp-python", "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMA_CPP_SUBDIR = f"llama_cpp_python-{VERSION}/vendor/llama.cpp"
TARGET = "llamacpp-harness"
DEFAULT_CACHE = Path.home() / ".cache" / "chat-autoparser" / "llamacpp-harness"


def log(message: str) -> None:
    print(f"[build_llamacpp_harness] {message}", file=sys.stderr, flush=True)


def run(cmd: list[str]) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, stdout=sys.stderr)  # (stdout stays for the binary's path)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(cache: Path) -> Path:
    """The pinned sdist in ``cache/dist``, downloaded with pip unless it is there already."""
    dist = cache / "dist"
    sdist = dist / SDIST
    if not sdist.exists():
        log(f"downloading the {PACKAGE} {VERSION} sdist (pip prepares its metadata: a minute or two)")
        run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             f"{PACKAGE}=={VERSION}", "-d", str(dist)])
    found = sha256(sdist)
    if found != SDIST_SHA256:
        raise SystemExit(f"{sdist}: sha256 {found}, expected {SDIST_SHA256} (delete it to download again)")
    return sdist


def unpack(sdist: Path, cache: Path) -> Path:
    """``vendor/llama.cpp`` of the sdist, unpacked under ``cache/src`` (once)."""
    src = cache / "src"
    tree = src / LLAMA_CPP_SUBDIR
    done = src / ".unpacked"
    if done.exists() and tree.is_dir():
        return tree
    log(f"unpacking {LLAMA_CPP_SUBDIR} into {src}")
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(sdist, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(LLAMA_CPP_SUBDIR + "/")]
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuse paths outside src
            tar.extractall(src, members=members, filter="data")
        else:
            tar.extractall(src, members=members)  # (a pinned, hash-checked archive)
    done.touch()
    return tree


def build(tree: Path, cache: Path, jobs: int) -> Path:
    """Configure (once) and build the harness in ``cache/build``; the binary's path."""
    if shutil.which("cmake") is None:
        raise SystemExit("cmake not found on PATH (and a C++17 compiler is needed too)")
    build_dir = cache / "build"
    configured = build_dir / "CMakeCache.txt"
    if not configured.exists() or str(tree) not in configured.read_text(errors="replace"):
        run(["cmake", "-S", str(HARNESS_SOURCE), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
             f"-DLLAMA_CPP_DIR={tree}"])
    run(["cmake", "--build", str(build_dir), "--config", "Release", "--target", TARGET, "-j", str(jobs)])
    binary = build_dir / "bin" / TARGET
    if not binary.exists():
        raise SystemExit(f"the build ended without {binary}")
    return binary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help=f"folder for the download, the sources and the build (default: {DEFAULT_CACHE})")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default: 2)")
    args = ap.parse_args(argv)
    cache = args.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    tree = unpack(download(cache), cache)
    binary = build(tree, cache, args.jobs)
    print(os.fspath(binary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
