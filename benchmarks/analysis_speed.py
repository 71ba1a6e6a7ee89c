"""Analysis and generation time per template over the corpus, with jinja2 and with minijinja:
cold, from the analysis cache, and against llama.cpp's C++ auto-parser.

Run by hand::

    python benchmarks/analysis_speed.py [--corpus DIR] [--engines jinja2,minijinja] [--limit N]
                                        [--llama-cpp BINARY] [--versus CHECKOUT]

Every template is analysed cold: the compile, parse and analysis caches are emptied first (the
disk cache is off, as it is for the library by default), so each time includes loading the
file, compiling the template and every probe render. Per template it records

* Phase 1: loading, compiling, capability probing, turn markers, reasoning and content
  (everything but the tool-call analysis);
* the whole analysis (Phase 1 + Phase 2, the tool-call structure);
* generation: ``generate_parser`` without tools and, where the template supports tools, with a
  two-tool request (parser, GBNF grammar, triggers);
* the CPU time of analysis + generation (``time.process_time``: steadier than wall time on a
  busy machine; for minijinja it leaves out the worker process' renders);

then the cached path, with the disk cache in a temporary folder: ``analyze_template(path)``
again in the same process (the memory cache), and with the memory cache emptied, as a process
that has not analysed it finds it (the disk cache), each alone and with generation. What a
process pays once, at its first disk lookup (hashing the analyzer's source, resolving the
analysis' field types), is measured apart.

It prints a Markdown table of median / p95 / max per engine. For minijinja it also gives the
figures over the templates whose minijinja analysis equals the jinja2 one (where minijinja
renders the probes identically), and counts the others.

``--versus CHECKOUT`` times another checkout of the project (an earlier commit, say: ``git
worktree add /tmp/old COMMIT``) against this one instead: each side in a process of its own,
both pinned to the same CPU, fed the corpus' templates alternately, each analysed cold (every
``cache_clear`` of the side's ``analyzer`` and ``generator`` modules called, then a
``gc.collect()``) with generation as above; it prints each side's median and p95 CPU time and
the ratios over the templates both analyse.

``--llama-cpp BINARY`` compares with llama.cpp's auto-parser on the same templates. BINARY is a
small harness built against llama.cpp's ``common`` library: given the request's tools as JSON (its
argument: :data:`TOOLS`), it reads template paths on stdin, one per line, and answers each at once
with
``wall_ms<TAB>cpu_ms<TAB>analysis_wall_ms<TAB>status<TAB>path`` (status ``ok`` or a short error
word), after timing, cold, what llama.cpp does to load a template
(``common_chat_template``: parse and capabilities), ``autoparser::analyze_template`` and
``peg_generator::generate_parser`` without tools and, where the template supports tools, with the
same two-tool request. Its runs alternate with ours, template by template, so both see the same
load on the machine. Its source is ``benchmarks/llamacpp_harness/`` (``main.cpp``, and a
``CMakeLists.txt`` that adds the llama.cpp tree given by ``LLAMA_CPP_DIR`` and links the
executable to ``llama-common``); ``python benchmarks/build_llamacpp_harness.py`` builds it against
the llama.cpp of the llama-cpp-python 0.3.36 sdist (downloaded into
``~/.cache/chat-autoparser/llamacpp-harness``; about ten minutes on two cores the first time) and
prints the binary's path.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import chat_autoparser.analyzer.analyze as analyze_module  # noqa: E402
from chat_autoparser.analyzer import analysis_cache, analyze_template, load_template  # noqa: E402
from chat_autoparser.analyzer.corpus import corpus_dir, corpus_entries  # noqa: E402
from chat_autoparser.errors import AnalysisError, TemplateError  # noqa: E402
from chat_autoparser.generator import generate_parser  # noqa: E402
from results import save  # noqa: E402 (benchmarks/results.py, beside this script)

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "units": {"type": "string", "enum": ["metric", "imperial"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Web search",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "filters": {"type": "array", "items": {"type": "string"}}},
            "required": ["query"]}}},
]


def clear_caches() -> None:
    """Empty every functools cache of the analyzer and generator, so the next analysis is cold."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(("chat_autoparser", "analyzer", "generator")):  # (also a checkout before 0.2.0)
            continue
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


class PhaseTimer:
    """Times the Phase 2 call inside ``analyze_template`` (Phase 1 = total - Phase 2)."""

    def __init__(self) -> None:
        self.phase2 = 0.0
        self._inner: Callable[..., Any] = analyze_module.analyze_tools

    def __enter__(self) -> "PhaseTimer":
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return self._inner(*args, **kwargs)
            finally:
                self.phase2 += time.perf_counter() - t
        analyze_module.analyze_tools = timed
        return self

    def __exit__(self, *exc: Any) -> None:
        analyze_module.analyze_tools = self._inner


def measure(path: Path, engine: str) -> dict[str, Any]:
    """Times (ms) of one cold analysis + generation, or the error that stopped it."""
    clear_caches()
    gc.collect()
    with analysis_cache.disk_cache_setting("off"), PhaseTimer() as timer:
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            analysis = analyze_template(load_template(path), engine=engine)
        except (TemplateError, AnalysisError) as e:
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        t1 = time.perf_counter()
    generate(analysis)
    t2, c2 = time.perf_counter(), time.process_time()
    analysis_ms = (t1 - t0) * 1000
    return {"phase1": analysis_ms - timer.phase2 * 1000, "analysis": analysis_ms,
            "generation": (t2 - t1) * 1000, "total": (t2 - t0) * 1000, "cpu": (c2 - c0) * 1000,
            "result": _comparable(analysis)}


def generate(analysis: Any) -> None:
    """What a server does with an analysis: a parser without tools, and one for a tool request."""
    generate_parser(analysis)
    if analysis.caps.supports_tools:
        generate_parser(analysis, tools=TOOLS)


def measure_cached(path: Path, engine: str, folder: str) -> dict[str, float]:
    """Times (ms) of analysing ``path`` again: from the disk cache in ``folder`` in a fresh state,
    then from memory; each alone and with generation. Empty when the analysis is not kept."""
    out: dict[str, float] = {}
    with analysis_cache.disk_cache_setting(folder):
        analysis_cache.cache_clear()
        try:
            analyze_template(path, engine=engine)  # computes and keeps it (untimed)
        except (TemplateError, AnalysisError):
            return out
        for label in ("disk", "memory"):
            if label == "disk":  # a process that has not analysed it (its other caches play no part)
                analysis_cache.cache_clear()
            gc.collect()
            t0 = time.perf_counter()
            analysis = analyze_template(path, engine=engine)
            t1 = time.perf_counter()
            generate(analysis)
            t2 = time.perf_counter()
            out[label], out[f"{label}+generation"] = (t1 - t0) * 1000, (t2 - t0) * 1000
    return out


def first_lookup(entries: list[Any], engine: str) -> float:
    """What a process pays once at its first disk lookup (ms): the first hit less the next one."""
    with tempfile.TemporaryDirectory(prefix="analysis-speed-") as folder, analysis_cache.disk_cache_setting(folder):
        for e in entries:
            try:
                analyze_template(e.path, engine=engine)
            except (TemplateError, AnalysisError):
                continue
            clear_caches()  # every per-process cache: as a new process
            t0 = time.perf_counter()
            analyze_template(e.path, engine=engine)
            t1 = time.perf_counter()
            analysis_cache.cache_clear()  # the analysis only: the next hit is a steady one
            analyze_template(e.path, engine=engine)
            t2 = time.perf_counter()
            return ((t1 - t0) - (t2 - t1)) * 1000
    return 0.0


VERSUS_WORKER = r"""
import gc, os, sys, time
root, cpu, tools = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {cpu})
sys.path.insert(0, root)
import json
from chat_autoparser.analyzer import analyze_template, load_template
from chat_autoparser.generator import generate_parser
TOOLS = json.loads(tools)
print(sys.modules[analyze_template.__module__].__file__, flush=True)  # (which checkout this side runs)

for line in sys.stdin:
    clear_caches()
    gc.collect()
    c = time.process_time()
    try:
        analysis = analyze_template(load_template(line.rstrip("\n")))
        generate_parser(analysis)
        if analysis.tool_call_structure.supports_tools:
            generate_parser(analysis, tools=TOOLS)
    except Exception:  # noqa: BLE001 - either side's typed errors (or another checkout's others)
        print("error", flush=True)
        continue
    print((time.process_time() - c) * 1000, flush=True)
"""


def versus(other: Path, entries: list[Any]) -> None:
    """This checkout's cold analysis + generation against ``other``'s, alternating (see the
    module's docstring)."""
    cpu = str(min(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "0"
    worker = inspect.getsource(clear_caches) + VERSUS_WORKER  # (each side empties its own caches)
    sides = {name: subprocess.Popen([sys.executable, "-c", worker, str(root), cpu, json.dumps(TOOLS)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
             for name, root in (("other", other.resolve()), ("this", ROOT))}
    for name, p in sides.items():
        print(f"{name}: {p.stdout.readline().strip()}")
    times: dict[str, list[float | None]] = {"other": [], "this": []}
    for e in entries:
        for name, p in sides.items():
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"{e.path}\n")
            p.stdin.flush()
            line = p.stdout.readline().strip()
            if not line:
                raise SystemExit(f"the {name} side failed (see its error above)")
            times[name].append(None if line == "error" else float(line))
    for p in sides.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    both = [(a, b) for a, b in zip(times["other"], times["this"]) if a is not None and b is not None]
    a, b = [x for x, _ in both], [y for _, y in both]
    print(f"\nCold analysis + generation, CPU time in ms, CPU {cpu}, alternating template by template "
          f"({len(both)} of {len(entries)} templates both analyse):\n")
    print("| measure | other | this | this ÷ other |\n|---|---:|---:|---:|")
    for label, f in (("median", statistics.median), ("p95", lambda v: percentile(v, 0.95)), ("sum", sum)):
        print(f"| {label} | {f(a):.1f} | {f(b):.1f} | {f(b) / f(a):.3f} |")


class LlamaCpp:
    """llama.cpp's auto-parser, timed by an external harness answering one template per line."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen([binary, json.dumps(TOOLS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def measure(self, path: Path) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        wall, cpu, analysis, status, _ = self.proc.stdout.readline().rstrip("\n").split("\t", 4)
        if status != "ok":
            return {"error": status}
        return {"total": float(wall), "cpu": float(cpu), "analysis": float(analysis)}

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _comparable(analysis: Any) -> dict[str, Any]:
    """The analysis without what names the engine: its name and its error messages' wording."""
    data = analysis.to_dict()
    data.pop("engine", None)
    data["probe_failures"] = [(f["probe"], f["kind"]) for f in data.get("probe_failures", [])]
    return data


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def stats(values: list[float]) -> dict[str, float]:
    """n, median, p95 and max of ``values`` (ms, rounded to 0.01), as ``--save`` keeps them."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(statistics.median(values), 2),
            "p95": round(percentile(values, 0.95), 2), "max": round(max(values), 2)}


def row(label: str, values: list[float]) -> str:
    if not values:
        return f"| {label} | 0 | - | - | - |"
    return (f"| {label} | {len(values)} | {statistics.median(values):.1f} | {percentile(values, 0.95):.1f} "
            f"| {max(values):.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: as the tests find it)")
    ap.add_argument("--engines", default="jinja2,minijinja")
    ap.add_argument("--limit", type=int, default=0, help="only the first N templates")
    ap.add_argument("--llama-cpp", metavar="BINARY", help="also time llama.cpp's auto-parser with this harness "
                    "(see the module's docstring)")
    ap.add_argument("--versus", metavar="CHECKOUT", type=Path,
                    help="time another checkout of the project against this one instead (see the module's docstring)")
    ap.add_argument("--save", action="store_true", help="keep the figures in benchmarks/results/analysis_speed.json")
    args = ap.parse_args(argv)
    if args.save and args.versus is not None:
        ap.error("--save keeps the corpus figures, not a --versus run")
    root = args.corpus or corpus_dir()
    entries = corpus_entries(root)
    if args.limit:
        entries = entries[:args.limit]
    if args.versus is not None:
        versus(args.versus, entries)
        return 0
    engines = [e for e in args.engines.split(",") if e]
    results: dict[str, dict[str, dict[str, Any]]] = {}
    cached: dict[str, dict[str, dict[str, float]]] = {}
    llama: dict[str, dict[str, dict[str, Any]]] = {}
    wall: dict[str, float] = {}
    harness = LlamaCpp(args.llama_cpp) if args.llama_cpp else None
    with tempfile.TemporaryDirectory(prefix="analysis-speed-") as folder:
        for engine in engines:
            t = time.perf_counter()
            results[engine], cached[engine], llama[engine] = {}, {}, {}
            for e in entries:
                results[engine][e.name] = measure(e.path, engine)
                if harness is not None:  # alternating: both sides see the same load on the machine
                    llama[engine][e.name] = harness.measure(e.path)
            wall[engine] = time.perf_counter() - t
            for e in entries:
                if "error" not in results[engine][e.name]:
                    cached[engine][e.name] = measure_cached(e.path, engine, os.path.join(folder, engine))
    if harness is not None:
        harness.close()
    once = first_lookup(entries, engines[0])
    saved: dict[str, Any] = {"templates": len(entries), "first_lookup_ms": round(once, 2), "engines": {}}
    print(f"# Analysis + generation time per template ({len(entries)} templates of {root})\n")
    print(f"Cold: caches emptied before each template; times in ms. A process' first disk-cache lookup "
          f"also pays {once:.1f} ms once (hashing the analyzer's source, resolving the analysis' types).\n")
    for engine in engines:
        done = {k: v for k, v in results[engine].items() if "error" not in v}
        errors = len(results[engine]) - len(done)
        print(f"## {engine}: {len(done)} analysed, {errors} typed errors, "
              f"{wall[engine]:.1f} s in all ({len(results[engine]) / wall[engine]:.0f} templates/s)\n")
        print("| measure | n | median | p95 | max |\n|---|---:|---:|---:|---:|")
        kept = [v for v in cached[engine].values() if v]
        figures = saved["engines"][engine] = {
            "analysed": len(done), "errors": errors,
            **{key: stats([v[key] for v in done.values()]) for key in ("phase1", "analysis", "generation", "total", "cpu")},
            **{key: stats([v[key] for v in kept]) for key in ("memory", "memory+generation", "disk", "disk+generation")}}
        for key, label in (("phase1", "Phase 1 (incl. load + compile)"), ("analysis", "analysis (both phases)"),
                           ("generation", "generation"), ("total", "analysis + generation"),
                           ("cpu", "analysis + generation, CPU time")):
            print(row(label, [v[key] for v in done.values()]))
        if engine != "jinja2" and "jinja2" in results:
            ref = results["jinja2"]
            same = [k for k, v in done.items() if "error" not in ref[k] and ref[k]["result"] == v["result"]]
            print(row(f"analysis + generation, where the analysis equals jinja2's ({len(same)})",
                      [done[k]["total"] for k in same]))
            figures["equal_to_jinja2"] = len(same)
        for key, label in (("memory", "again, from memory: analysis"),
                           ("memory+generation", "again, from memory: analysis + generation"),
                           ("disk", "new process, from disk: analysis"),
                           ("disk+generation", "new process, from disk: analysis + generation")):
            print(row(label, [v[key] for v in kept]))
        if engine != "jinja2" and "jinja2" in results:
            differ = sorted(k for k in done if k not in same)
            if differ:
                print(f"\n{len(differ)} analysed templates differ from jinja2's analysis, e.g. "
                      + ", ".join(differ[:5]))
        if harness is not None:
            figures["llama_cpp"] = print_llama(done, llama[engine])
        slow = sorted(done.items(), key=lambda kv: -kv[1]["total"])[:5]
        print("\nslowest: " + ", ".join(f"{k} ({v['total']:.0f} ms)" for k, v in slow) + "\n")
    if args.save:
        print(f"saved to {save('analysis_speed', [a for a in (argv if argv is not None else sys.argv[1:]) if a != '--save'], saved)}")
    return 0


def print_llama(ours: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """llama.cpp's figures on the templates both analyse, ours beside them, and the ratios (also
    returned, for ``--save``)."""
    both = [k for k in ours if "error" not in theirs.get(k, {"error": ""})]
    failed = sum("error" in v for v in theirs.values())
    print(f"\nAgainst llama.cpp's auto-parser, alternating template by template ({len(both)} templates both "
          f"analyse; llama.cpp fails on {failed}):\n")
    print("| measure | n | median | p95 | max |\n|---|---:|---:|---:|---:|")
    figures: dict[str, Any] = {"both": len(both), "llama_cpp_fails": failed}
    for key, label in (("total", "analysis + generation"), ("cpu", "analysis + generation, CPU time")):
        mine, its = [ours[k][key] for k in both], [theirs[k][key] for k in both]
        figures[key] = {"llama_cpp": stats(its), "ours": stats(mine)}
        print(row(f"llama.cpp: {label}", its))
        print(row(f"ours: {label}", mine))
        if its and mine:
            print(f"| ours / llama.cpp: {label} | {len(both)} | {statistics.median(mine) / statistics.median(its):.2f}x "
                  f"| {percentile(mine, 0.95) / percentile(its, 0.95):.2f}x | {max(mine) / max(its):.2f}x |")
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
