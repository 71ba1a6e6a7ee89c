"""Analysis and generation time per template over the corpus, with jinja2 and with minijinja.

Run by hand::

    python benchmarks/analysis_speed.py [--corpus DIR] [--engines jinja2,minijinja] [--limit N]

Every template is analysed cold: the compile and parse caches are emptied first, so each time
includes loading the file, compiling the template and every probe render. Per template it
records

* Phase 1: loading, compiling, capability probing, turn markers, reasoning and content
  (everything but the tool-call analysis);
* the whole analysis (Phase 1 + Phase 2, the tool-call structure);
* generation: ``generate_parser`` without tools and, where the template supports tools, with a
  two-tool request (parser, GBNF grammar, triggers).

and prints a Markdown table of median / p95 / max per engine. For minijinja it also gives the
figures over the templates whose minijinja analysis equals the jinja2 one (where minijinja
renders the probes identically), and counts the others.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import analyzer.analyze as analyze_module  # noqa: E402
from analyzer import analyze_template, load_template  # noqa: E402
from analyzer.corpus import corpus_dir, corpus_entries  # noqa: E402
from analyzer.errors import AnalysisError, TemplateError  # noqa: E402
from generator import generate_parser  # noqa: E402

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
        if not name.startswith(("analyzer", "generator")):
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
    with PhaseTimer() as timer:
        t0 = time.perf_counter()
        try:
            analysis = analyze_template(load_template(path), engine=engine)
        except (TemplateError, AnalysisError) as e:
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        t1 = time.perf_counter()
    generate_parser(analysis)
    if analysis.caps.supports_tools:
        generate_parser(analysis, tools=TOOLS)
    t2 = time.perf_counter()
    analysis_ms = (t1 - t0) * 1000
    return {"phase1": analysis_ms - timer.phase2 * 1000, "analysis": analysis_ms,
            "generation": (t2 - t1) * 1000, "total": (t2 - t0) * 1000, "result": _comparable(analysis)}


def _comparable(analysis: Any) -> dict[str, Any]:
    """The analysis without what names the engine: its name and its error messages' wording."""
    data = analysis.to_dict()
    data.pop("engine", None)
    data["probe_failures"] = [(f["probe"], f["kind"]) for f in data.get("probe_failures", [])]
    return data


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


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
    args = ap.parse_args(argv)
    root = args.corpus or corpus_dir()
    entries = corpus_entries(root)
    if args.limit:
        entries = entries[:args.limit]
    engines = [e for e in args.engines.split(",") if e]
    results: dict[str, dict[str, dict[str, Any]]] = {}
    wall: dict[str, float] = {}
    for engine in engines:
        t = time.perf_counter()
        results[engine] = {e.name: measure(e.path, engine) for e in entries}
        wall[engine] = time.perf_counter() - t
    print(f"# Analysis + generation time per template ({len(entries)} templates of {root})\n")
    print("Cold: caches emptied before each template; times in ms.\n")
    for engine in engines:
        done = {k: v for k, v in results[engine].items() if "error" not in v}
        errors = len(results[engine]) - len(done)
        print(f"## {engine}: {len(done)} analysed, {errors} typed errors, "
              f"{wall[engine]:.1f} s in all ({len(results[engine]) / wall[engine]:.0f} templates/s)\n")
        print("| measure | n | median | p95 | max |\n|---|---:|---:|---:|---:|")
        for key, label in (("phase1", "Phase 1 (incl. load + compile)"), ("analysis", "analysis (both phases)"),
                           ("generation", "generation"), ("total", "analysis + generation")):
            print(row(label, [v[key] for v in done.values()]))
        if engine != "jinja2" and "jinja2" in results:
            ref = results["jinja2"]
            same = [k for k, v in done.items() if "error" not in ref[k] and ref[k]["result"] == v["result"]]
            print(row(f"analysis + generation, where the analysis equals jinja2's ({len(same)})",
                      [done[k]["total"] for k in same]))
            differ = sorted(k for k in done if k not in same)
            if differ:
                print(f"\n{len(differ)} analysed templates differ from jinja2's analysis, e.g. "
                      + ", ".join(differ[:5]))
        slow = sorted(done.items(), key=lambda kv: -kv[1]["total"])[:5]
        print("\nslowest: " + ", ".join(f"{k} ({v['total']:.0f} ms)" for k, v in slow) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
