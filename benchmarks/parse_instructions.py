"""Parser cost in CPU instructions (valgrind callgrind): a figure that does not move with the load
of a shared machine, for comparing two versions of the parser.

Run by hand (needs valgrind; each part runs Python under callgrind, ~1 min each)::

    python benchmarks/parse_instructions.py [--template PATH] [--size 60000]

The output of ``parse_speed.py`` (reasoning, content, ``<tool_call>`` JSON calls) is cut in two:
the text before the first call, and the calls. Each is streamed in 4-character chunks, and the
whole output is parsed one-shot 5 times. A run that only builds the parser is subtracted. Prints
instructions per chunk for each streamed part, and per one-shot parse.
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


def inner(part: str, template: Path, size: int) -> None:
    from analyzer import analyze_template
    from generator import generate_parser
    from parse_speed import TOOLS, chunks_of, make_output

    parser = generate_parser(analyze_template(template), tools=TOOLS).parser
    text, _ = make_output(size)
    cut = text.index("<tool_call>")
    if part in ("head", "calls"):
        stream = parser.stream()
        for chunk in chunks_of(text[:cut] if part == "head" else text[cut:]):
            stream.feed(chunk)
        stream.finish()
    elif part == "one-shot":
        for _ in range(5):
            parser.parse(text)


def collected(part: str, template: Path, size: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--inner", part, "--template", str(template), "--size", str(size)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or m is None:
        raise SystemExit(f"callgrind failed on {part}: {out.stderr[-500:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--template", type=Path, default=ROOT / "templates" / "chatml-think.jinja")
    ap.add_argument("--size", type=int, default=60_000)
    ap.add_argument("--inner", choices=PARTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        inner(args.inner, args.template, args.size)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    from parse_speed import chunks_of, make_output
    text, _ = make_output(args.size)
    cut = text.index("<tool_call>")
    n = {"head": len(chunks_of(text[:cut])), "calls": len(chunks_of(text[cut:]))}
    base = collected("none", args.template, args.size)
    print(f"template: {args.template.name}; {len(text):,} bytes; instructions (callgrind)\n")
    print("| part | instructions | per unit |")
    print("|---|---:|---:|")
    for part in PARTS[1:]:
        cost = collected(part, args.template, args.size) - base
        unit, per = ("one-shot parse", cost / 5) if part == "one-shot" else ("chunk", cost / n[part])
        print(f"| {part} | {cost:,} | {per:,.0f} per {unit} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
