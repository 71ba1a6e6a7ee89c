"""This parser against another checkout of the project (a release, say) on that checkout's own
speed workload: JSON-in-tags output with ``<think>`` reasoning, as ``benchmarks/parse_speed.py``
of 0.1.0 built it (``make_output`` of the other checkout's ``benchmarks/parse_speed.py``).

Usage::

    git worktree add /tmp/v010 5d898f2          # 0.1.0
    python benchmarks/versus_checkout.py /tmp/v010 [--sizes 1000,...] [--template PATH]

Each side runs in a process of its own (both import the analyzer and the generator), both
pinned to the same CPU (a shared machine's processes otherwise differ by up to 1.7x on the same
code), fed the same texts alternately, one batch at a time: a ``gc.collect()``, then runs back to
back (as ``parse_speed.py`` runs them: warm) for about 20 ms. The table shows each side's median
time per run over the batches and the ratio (this checkout's time over the other's: above 1 is
slower).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import gc, os, sys, time
root, other, template, cpu = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {cpu})
sys.path.insert(0, root)
try:  # (first: the workload's module puts its own checkout on the path)
    from chat_autoparser.analyzer import analyze_template
    from chat_autoparser.generator import generate_parser
except ImportError:  # a checkout before 0.2.0, with two top-level names
    from analyzer import analyze_template
    from generator import generate_parser
sys.path.insert(0, other + "/benchmarks")
from parse_speed import TOOLS, chunks_of, make_output
parser = generate_parser(analyze_template(template), tools=TOOLS).parser
print(sys.modules[generate_parser.__module__].__file__, flush=True)  # (which checkout this side runs)
texts = {}

def once(kind, text, chunks):
    if kind == "one-shot":
        parser.parse(text)
    else:
        s = parser.stream()
        for c in chunks:
            s.feed(c)
        s.finish()

for line in sys.stdin:
    kind, size, runs = line.split()
    if size not in texts:
        text = make_output(int(size))[0]
        texts[size] = text, chunks_of(text)
    text, chunks = texts[size]
    gc.collect()
    t = time.perf_counter()
    for _ in range(int(runs)):
        once(kind, text, chunks)
    print((time.perf_counter() - t) / int(runs), flush=True)
"""


def batches_for(size: int) -> int:
    return 41 if size <= 10_000 else 21 if size <= 100_000 else 9


def per_batch(kind: str, size: int) -> int:
    """Runs in a batch: about 20 ms of work (a µs per byte streamed, 0.1 one-shot)."""
    return max(1, round(20_000 / (size * (1 if kind == "stream" else 0.1) + 20)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", type=Path, help="the other checkout (its benchmarks/parse_speed.py builds the outputs)")
    ap.add_argument("--sizes", default="1000,10000,100000,300000,1000000")
    ap.add_argument("--template", type=Path, default=None,
                    help="default: templates/chatml-think.jinja of the other checkout")
    args = ap.parse_args(argv)
    other = args.other.resolve()
    template = str(args.template or other / "templates" / "chatml-think.jinja")
    cpu = str(min(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "0"
    sides = {name: subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(other), template, cpu],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
             for name, root in (("other", other), ("this", ROOT))}

    def timed(name: str, kind: str, size: int) -> float:
        p = sides[name]
        p.stdin.write(f"{kind} {size} {per_batch(kind, size)}\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"the {name} side failed (see its error above)")
        return float(line)

    for name, p in sides.items():
        print(f"{name}: {p.stdout.readline().strip()}")
    print(f"template: {Path(template).name}; CPU {cpu}; median time per run over alternating batches\n")
    print("| bytes | kind | other ms | this ms | this ÷ other |")
    print("|---:|---|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in ("one-shot", "stream"):
            times: dict[str, list[float]] = {"other": [], "this": []}
            for _ in range(batches_for(size)):
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
