"""Parser cost in CPU instructions (valgrind callgrind): a figure that does not move with the load
of a shared machine, for comparing two versions of the parser.

Run by hand (needs valgrind; each part runs Python under callgrind, ~1 min each)::

    python benchmarks/parse_instructions.py [--format json|xml|prefixed|all] [--size 60000]

The output of ``parse_speed.py`` for each format (JSON in tags, XML arguments, prefixed calls:
reasoning where the template has it, content, calls) is cut in two: the text before the first
call, and the calls. Each is streamed in 4-character chunks; a run that only builds the parser
(and renders the output) is subtracted. One-shot, the whole output is parsed 5 times after one
parse that warms up, by ours, by the single-pass single-pass baseline of ``parse_speed.py`` (SP) and, where
installed, by SGLang's detector; a run with only the warm-up parse is subtracted.
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
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

STREAMED = ("none", "head", "calls")
ONE_SHOT = ("ours", "SP", "SGLang")  # (each run as "KIND:N": the warm-up parse, then N more)
PARTS = STREAMED + tuple(f"{kind}:{n}" for kind in ONE_SHOT for n in (0, 5))


def one_shot_parser(kind: str, fmt: str) -> Callable[[str], object] | str:
    """The one-shot parse of ``kind`` for ``fmt`` (a message: why it is not at hand)."""
    from parse_speed import FORMATS, sglang

    f = FORMATS[fmt]
    if kind == "ours":
        return f.parser.parse
    if kind == "SP":
        return f.lb_one
    peer = sglang(f)
    return peer if isinstance(peer, str) else peer[0]


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
    elif part != "none":
        kind, n = part.split(":")
        parse = one_shot_parser(kind, fmt)
        assert not isinstance(parse, str), parse
        for _ in range(1 + int(n)):
            parse(text)


def collected(part: str, fmt: str, size: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--inner", part, "--format", fmt, "--size", str(size)]
    # valgrind starts the interpreter by its real path, outside a virtual environment: the
    # child is handed this process' module path (else it would import another site-packages)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or m is None:
        raise SystemExit(f"callgrind failed on {part}: {out.stderr[-500:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=["json", "xml", "prefixed", "all"], default="all")
    ap.add_argument("--size", type=int, default=60_000)
    ap.add_argument("--inner", choices=PARTS, help=argparse.SUPPRESS)
    ap.add_argument("--save", action="store_true", help="keep the figures in benchmarks/results/parse_instructions.json")
    args = ap.parse_args(argv)
    if args.inner:
        inner(args.inner, args.format, args.size)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    from parse_speed import FORMATS, chunks_of, make_output
    from results import save
    kept: dict[str, dict[str, Any]] = {}
    print("instructions (callgrind); streaming in 4-character chunks\n")
    print("| format | template | bytes | part | instructions | per unit |")
    print("|---|---|---:|---|---:|---:|")
    for fmt in FORMATS if args.format == "all" else [args.format]:
        text = make_output(fmt, args.size).text
        cut = text.index(FORMATS[fmt].calls_start)
        n = {"head": len(chunks_of(text[:cut])), "calls": len(chunks_of(text[cut:]))}
        base = collected("none", fmt, args.size)
        row = f"| {fmt} | {FORMATS[fmt].path.name} | {len(text):,} |"
        figures = kept[fmt] = {"bytes": len(text), "template": FORMATS[fmt].path.name, "per_chunk": {}, "per_parse": {}}
        for part in STREAMED[1:]:
            cost = collected(part, fmt, args.size) - base
            figures["per_chunk"][part] = round(cost / n[part])
            print(f"{row} {part} | {cost:,} | {cost / n[part]:,.0f} per chunk |", flush=True)
        for kind in ONE_SHOT:
            why = one_shot_parser(kind, fmt)
            if isinstance(why, str):
                print(f"{row} one-shot, {kind} | ({why}) | |", flush=True)
                continue
            cost = collected(f"{kind}:5", fmt, args.size) - collected(f"{kind}:0", fmt, args.size)
            figures["per_parse"][kind] = round(cost / 5)
            print(f"{row} one-shot, {kind} | {cost:,} | {cost / 5:,.0f} per parse |", flush=True)
    if args.save:
        print(f"saved to {save('parse_instructions', [a for a in (argv if argv is not None else sys.argv[1:]) if a != '--save'], kept)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
