"""This parser against another checkout of the project (a release, say) on that checkout's own
speed workload: JSON-in-tags output with ``<think>`` reasoning, as ``benchmarks/parse_speed.py``
of 0.1.0 built it (``make_output`` of the other checkout's ``benchmarks/parse_speed.py``).

Usage::

    git worktree add /tmp/v010 5d898f2          # 0.1.0
    python benchmarks/versus_checkout.py /tmp/v010 [--sizes 1000,...] [--template PATH]

Each side runs in a process of its own (both import ``analyzer`` and ``generator``), fed the
same texts alternately, one parse or one stream (4-character chunks) at a time after a
``gc.collect()``; the table shows each side's median wall time and the ratio (this checkout's
time over the other's: above 1 is slower).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import gc, sys, time
root, other, template = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
from analyzer import analyze_template  # (first: the workload's module puts its own checkout on the path)
from generator import generate_parser
sys.path.insert(0, other + "/benchmarks")
from parse_speed import TOOLS, chunks_of, make_output
parser = generate_parser(analyze_template(template), tools=TOOLS).parser
print(sys.modules[generate_parser.__module__].__file__, flush=True)  # (which checkout this side runs)
texts = {}
for line in sys.stdin:
    kind, size = line.split()
    if size not in texts:
        text = make_output(int(size))[0]
        texts[size] = text, chunks_of(text)
    text, chunks = texts[size]
    gc.collect()
    t = time.perf_counter()
    if kind == "one-shot":
        parser.parse(text)
    else:
        s = parser.stream()
        for c in chunks:
            s.feed(c)
        s.finish()
    print(time.perf_counter() - t, flush=True)
"""


def runs_for(size: int) -> int:
    return 201 if size <= 1_000 else 51 if size <= 10_000 else 21 if size <= 100_000 else 7


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", type=Path, help="the other checkout (its benchmarks/parse_speed.py builds the outputs)")
    ap.add_argument("--sizes", default="1000,10000,100000,300000,1000000")
    ap.add_argument("--template", type=Path, default=None,
                    help="default: templates/chatml-think.jinja of the other checkout")
    args = ap.parse_args(argv)
    other = args.other.resolve()
    template = str(args.template or other / "templates" / "chatml-think.jinja")
    sides = {name: subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(other), template], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, cwd="/")
             for name, root in (("other", other), ("this", ROOT))}

    def timed(name: str, kind: str, size: int) -> float:
        p = sides[name]
        p.stdin.write(f"{kind} {size}\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"the {name} side failed (see its error above)")
        return float(line)

    for name, p in sides.items():
        print(f"{name}: {p.stdout.readline().strip()}")
    print(f"template: {Path(template).name}; median wall time, alternating\n")
    print("| bytes | kind | other ms | this ms | this ÷ other |")
    print("|---:|---|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in ("one-shot", "stream"):
            times: dict[str, list[float]] = {"other": [], "this": []}
            for _ in range(runs_for(size)):
                for name in times:
                    times[name].append(timed(name, kind, size))
            a, b = statistics.median(times["other"]), statistics.median(times["this"])
            print(f"| {size:,} | {kind} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.3f} |", flush=True)
    for p in sides.values():
        p.stdin.close()
        p.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
