"""Parser cost in CPU instructions (valgrind callgrind): a figure that does not move with the load
of a shared machine, for comparing two versions of the parser.

Run by hand (needs valgrind; each part runs Python under callgrind, ~1 min each)::

    python benchmarks/parse_instructions.py [--format json|xml|prefixed|all] [--size 60000]

The output of ``parse_speed.py`` for each format (JSON in tags, XML arguments, prefixed calls:
reasoning where the template has it, content, calls) is cut in two: the text before the first
call, and the calls. Each is streamed in 4-character chunks, and the whole output is parsed
one-shot 5 times. A run that only builds the parser (and renders the output) is subtracted.
Prints instructions per chunk for each streamed part, and per one-shot parse.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PARTS = ("none", "head", "calls", "one-shot")


def inner(part: str, fmt: str, size: int) -> None:
    from parse_speed import FORMATS, chunks_of, make_output

    parser = FORMATS[fmt].parser
    text = make_output(fmt, size).text
    cut = text.index(FORMATS[fmt].calls_start)
    if part in ("head", "calls"):
        stream = parser.stream()
        for chunk in chunks_of(text[:cut] if part == "head" else text[cut:]):
            stream.feed(chunk)
        stream.finish()
    elif part == "one-shot":
        for _ in range(5):
            parser.parse(text)


def collected(part: str, fmt: str, size: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--inner", part, "--format", fmt, "--size", str(size)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or m is None:
        raise SystemExit(f"callgrind failed on {part}: {out.stderr[-500:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=["json", "xml", "prefixed", "all"], default="all")
    ap.add_argument("--size", type=int, default=60_000)
    ap.add_argument("--inner", choices=PARTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        inner(args.inner, args.format, args.size)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    from parse_speed import FORMATS, chunks_of, make_output
    print("instructions (callgrind); streaming in 4-character chunks\n")
    print("| format | template | bytes | part | instructions | per unit |")
    print("|---|---|---:|---|---:|---:|")
    for fmt in FORMATS if args.format == "all" else [args.format]:
        text = make_output(fmt, args.size).text
        cut = text.index(FORMATS[fmt].calls_start)
        n = {"head": len(chunks_of(text[:cut])), "calls": len(chunks_of(text[cut:]))}
        base = collected("none", fmt, args.size)
        for part in PARTS[1:]:
            cost = collected(part, fmt, args.size) - base
            unit, per = ("one-shot parse", cost / 5) if part == "one-shot" else ("chunk", cost / n[part])
            print(f"| {fmt} | {FORMATS[fmt].path.name} | {len(text):,} | {part} | {cost:,} | {per:,.0f} per {unit} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
