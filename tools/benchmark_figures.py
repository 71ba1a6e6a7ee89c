"""The benchmark tables of ``docs/benchmarks.md`` and the README's headline speed figures,
written from what the benchmarks measured instead of by hand.

Each benchmark run with ``--save`` keeps its figures in ``benchmarks/results/<name>.json``
(``benchmarks/results.py``: the figures, the command, commit, date and machine). This writes
them into the documents between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` lines (one
block per benchmark in ``docs/benchmarks.md``, and ``bench:headline`` in the README)::

    python benchmarks/analysis_speed.py --save --llama-cpp BINARY   # (each benchmark, by hand)
    python -m chat_autoparser.tools.benchmark_figures            # rewrite the blocks
    python -m chat_autoparser.tools.benchmark_figures --check    # exit 1 if a block differs from the results

``tests/test_benchmark_figures.py`` runs the check, so a figure edited by hand, or a result file
committed without its tables, fails the suite. No timing is asserted anywhere: the figures are
what one run on one machine measured, and each block says which run.

Example::

    >>> saved = {"commit": "abc1234", "date": "2026-11-29", "machine": {"cpus": 2, "python": "3.11.7"},
    ...          "command": "python benchmarks/render_parity.py",
    ...          "results": {"templates": 2, "conversations": 10, "engines": {
    ...              "jinja2": {"identical": 2, "differing": [], "both_raise": 0},
    ...              "minijinja": {"identical": 1, "differing": ["a.jinja"], "both_raise": 0}}}}
    >>> print(render_parity(saved))
    | engine | templates rendering every conversation as transformers does | (template, conversation) pairs both refuse |
    |---|---:|---:|
    | jinja2 | 2/2 | 0 |
    | minijinja | 1/2 | 0 |
    <BLANKLINE>
    Differing under minijinja: a.jinja.
    <BLANKLINE>
    Measured by `python benchmarks/render_parity.py` at abc1234 on 2026-11-29 (2 CPUs, Python 3.11.7).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "benchmarks.md"
README = REPO / "README.md"
FORMAT_TITLES = {"json": "JSON in tags", "xml": "XML arguments", "prefixed": "prefixed calls"}
PEERS = {"hf": "transformers", "sglang": "SGLang"}


def _measured(saved: dict[str, Any]) -> str:
    m = saved.get("machine", {})
    return (f"Measured by `{saved['command']}` at {saved['commit']} on {saved['date']} "
            f"({m.get('cpus', '?')} CPUs, Python {m.get('python', '?')}).")


def _ms(stat: dict[str, Any]) -> str:
    return "–" if not stat.get("n") else f"{stat['median']:.1f} / {stat['p95']:.1f}"


def _x(a: float | None, b: float | None, digits: int = 2) -> str:
    """``a / b`` as a ratio, or a dash when either is missing or not positive."""
    return "–" if not a or not b or a <= 0 or b <= 0 else f"{a / b:.{digits}f}"


def analysis_speed(saved: dict[str, Any]) -> str:
    """The per-engine table (cold, memory cache, disk cache) and, where the run had it, llama.cpp's."""
    r = saved["results"]
    lines = ["| engine | analysed | typed errors | cold | cold, CPU time | again, from memory: analysis / + generation "
             "| new process, from disk: analysis / + generation |", "|---|---:|---:|---:|---:|---:|---:|"]
    for engine, e in r["engines"].items():
        equal = f" ({e['equal_to_jinja2']} equal to jinja2's)" if "equal_to_jinja2" in e else ""
        lines.append(f"| {engine} | {e['analysed']}{equal} | {e['errors']} | {_ms(e['total'])} | {_ms(e['cpu'])} "
                     f"| {e['memory']['median']:.1f} / {e['memory+generation']['median']:.1f} "
                     f"| {e['disk']['median']:.1f} / {e['disk+generation']['median']:.1f} |")
    lines += ["", f"Analysis + generation per template over {r['templates']} corpus templates, in ms: median / p95 "
              f"(the cache columns: medians). A process' first disk-cache lookup also pays "
              f"{r['first_lookup_ms']:.1f} ms once."]
    harness = {engine: e["llama_cpp"] for engine, e in r["engines"].items() if "llama_cpp" in e}
    if harness:
        lines += ["", "| ours | templates both analyse | llama.cpp: median / p95 | ours: median / p95 "
                  "| ours ÷ llama.cpp: median / p95 | in CPU time |", "|---|---:|---:|---:|---:|---:|"]
        for engine, l in harness.items():
            t, c = l["total"], l["cpu"]
            lines.append(f"| {engine} | {l['both']} | {_ms(t['llama_cpp'])} | {_ms(t['ours'])} "
                         f"| {_x(t['ours']['median'], t['llama_cpp']['median'])}x / "
                         f"{_x(t['ours']['p95'], t['llama_cpp']['p95'])}x "
                         f"| {_x(c['ours']['median'], c['llama_cpp']['median'])}x / "
                         f"{_x(c['ours']['p95'], c['llama_cpp']['p95'])}x |")
        fails = sorted({l["llama_cpp_fails"] for l in harness.values()})
        lines += ["", f"llama.cpp's harness refuses {' / '.join(map(str, fails))} templates (its own errors); the "
                  f"ratios are over the templates both analyse, timed alternately in the same run."]
    lines += ["", _targets(r["engines"])]
    return "\n".join(lines + ["", _measured(saved)])


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _targets(engines: dict[str, Any]) -> str:
    """The analysis targets, and whether this run meets them (jinja2, the reference engine)."""
    j = engines.get("jinja2") or next(iter(engines.values()))
    parts = [f"from memory under 1 ms: {j['memory']['median']:.1f} ms, {_met(j['memory']['median'] < 1)}"]
    if "llama_cpp" in j:
        t = j["llama_cpp"]["total"]
        ratio = t["ours"]["median"] / t["llama_cpp"]["median"]
        parts.insert(0, f"cold at most 3x llama.cpp's median: {ratio:.2f}x, {_met(ratio <= 3)}")
    return "Targets in this run (jinja2): " + "; ".join(parts) + "."


def _ordered(formats: dict[str, Any]) -> list[tuple[str, Any]]:
    """The formats in the order of FORMAT_TITLES (then any other)."""
    return sorted(formats.items(), key=lambda kv: list(FORMAT_TITLES).index(kv[0]) if kv[0] in FORMAT_TITLES else 99)


def _missed(row: dict[str, Any]) -> list[str]:
    """The parse targets one size misses, each with its figure."""
    one, stream, why = row["one_shot_s"], row["stream_s"], []
    if one["ours"] > 2 * one["lb"]:
        why.append(f"one-shot {one['ours'] / one['lb']:.1f}x SP")
    if stream["ours"] > 3 * stream["lb"]:
        why.append(f"streamed {stream['ours'] / stream['lb']:.1f}x SP")
    if row["p99_us"]["ours"] >= 20:
        why.append(f"p99 {row['p99_us']['ours']:.1f} µs")
    for p in PEERS:
        for kind, t in (("one-shot", one), ("streamed", stream)):
            if p in t and t[p] <= t["ours"]:
                why.append(f"{PEERS[p]} {kind} {t[p] / t['ours']:.1f}x ours")
    return why


def parse_speed(saved: dict[str, Any]) -> str:
    """Per format and size: ours against the single-pass baseline, and each peer against ours."""
    r = saved["results"]
    peers = [p for p in PEERS if any(p in row["one_shot_s"] for rows in r["formats"].values() for row in rows)]
    head = "".join(f" {PEERS[p]} ÷ ours one-shot | {PEERS[p]} ÷ ours stream |" for p in peers)
    lines = [f"| format | bytes | ours one-shot ms | one-shot × SP | stream × SP | p99 µs/chunk |{head}",
             "|---|---:|---:|---:|---:|---:|" + "---:|---:|" * len(peers)]
    wrong = []
    for name, rows in _ordered(r["formats"]):
        for row in rows:
            one, stream = row["one_shot_s"], row["stream_s"]
            cells = "".join(f" {_x(one.get(p), one['ours'], 1)} | {_x(stream.get(p), stream['ours'], 1)} |"
                            for p in peers)
            lines.append(f"| {FORMAT_TITLES.get(name, name)} | {row['bytes']:,} | {one['ours'] * 1e3:.2f} "
                         f"| {_x(one['ours'], one['lb'], 1)} | {_x(stream['ours'], stream['lb'], 1)} "
                         f"| {row['p99_us']['ours']:.1f} |{cells}")
            wrong += [f"{PEERS.get(p, p)} on {FORMAT_TITLES.get(name, name)} ({what})" for p, what in row["wrong"].items()]
    big = [(name, row) for name, rows in _ordered(r["formats"]) for row in rows
           if any(abs(row["bytes"] - t) <= t // 10 for t in (100_000, 1_000_000))]
    if big:
        missed = [f"{FORMAT_TITLES.get(name, name)} at {row['bytes']:,} bytes ({', '.join(why)})"
                  for name, row in big if (why := _missed(row))]
        lines += ["", "Targets at 100 KB and 1 MB (one-shot at most 2x SP, streamed at most 3x, p99 under 20 µs, "
                  "faster than every peer): " + ("met for every format and size" if not missed else
                                                 "**not met** for " + "; ".join(missed)) + "."]
    lines += ["", f"Medians of {r['repeat']} rounds; streaming in 4-character chunks ({r['stream_runs']} streamed "
              f"run(s) per round); × SP: ours ÷ the single-pass baseline (lower is better); peer ÷ ours: above 1 "
              f"we are faster; – where the peer was not run."]
    if wrong:
        lines += ["", "Read wrongly by a peer: " + "; ".join(wrong) + "."]
    return "\n".join(lines + ["", _measured(saved)])


def parse_instructions(saved: dict[str, Any]) -> str:
    """Instructions per streamed chunk and per one-shot parse, by format."""
    r = saved["results"]
    lines = ["| format | bytes | text before calls, per chunk | calls, per chunk | one-shot: ours | SP | SGLang |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def m(n: int | None) -> str:
        return "–" if n is None or n <= 0 else f"{n / 1e6:.1f} M"

    for name, f in _ordered(r):
        p = f["per_parse"]
        lines.append(f"| {FORMAT_TITLES.get(name, name)} | {f['bytes']:,} | {f['per_chunk']['head']:,} "
                     f"| {f['per_chunk']['calls']:,} | {m(p.get('ours'))} | {m(p.get('SP'))} | {m(p.get('SGLang'))} |")
    lines += ["", "CPU instructions under valgrind (callgrind), which do not move with the machine's load; – where "
              "a peer was not installed or its count was not positive (its imports ran inside the timed parses)."]
    return "\n".join(lines + ["", _measured(saved)])


def render_parity(saved: dict[str, Any]) -> str:
    """How many templates each engine renders exactly as transformers."""
    r = saved["results"]
    lines = ["| engine | templates rendering every conversation as transformers does "
             "| (template, conversation) pairs both refuse |", "|---|---:|---:|"]
    for engine, e in r["engines"].items():
        lines.append(f"| {engine} | {e['identical']}/{r['templates']} | {e['both_raise']} |")
    differ = [f"Differing under {engine}: {', '.join(e['differing'])}." for engine, e in r["engines"].items()
              if e["differing"]]
    if differ:
        lines += [""] + differ
    return "\n".join(lines + ["", _measured(saved)])


def headline(results: dict[str, dict[str, Any]]) -> str:
    """The README's short paragraph: the figures each benchmark is run for, with their runs."""
    parts = []
    if a := results.get("analysis_speed"):
        e = a["results"]["engines"]
        j = e.get("jinja2") or next(iter(e.values()))
        text = (f"Analysing a template and generating its parser takes {j['total']['median']:.1f} ms at the median "
                f"({j['total']['p95']:.1f} ms p95, cold, jinja2) over {j['analysed']} corpus templates, "
                f"{j['memory+generation']['median']:.1f} ms again from the memory cache")
        if "llama_cpp" in j:
            t = j["llama_cpp"]["total"]
            text += (f"; {_x(t['ours']['median'], t['llama_cpp']['median'])}x the time of llama.cpp's C++ "
                     f"auto-parser at the median ({j['llama_cpp']['both']} templates both analyse, same run)")
        parts.append(text + f" (`analysis_speed.py`, {a['commit']}).")
    if p := results.get("parse_speed"):
        rows = [(name, row) for name, rows in _ordered(p["results"]["formats"]) for row in rows
                if abs(row["bytes"] - 100_000) <= 10_000]
        if rows:
            cells = "; ".join(
                f"{FORMAT_TITLES.get(name, name)} {_x(row['one_shot_s']['ours'], row['one_shot_s']['lb'], 1)}x"
                + "".join(f", {PEERS[k]} {_x(row['one_shot_s'][k], row['one_shot_s']['ours'], 1)}x"
                          for k in PEERS if k in row["one_shot_s"]) for name, row in rows)
            parts.append(f"Parsing a 100 KB output one-shot, ours ÷ a single-pass baseline and each peer's time ÷ ours: "
                         f"{cells} (`parse_speed.py`, {p['commit']}).")
    if r := results.get("render_parity"):
        e = r["results"]["engines"]
        parts.append("Rendering: " + ", ".join(f"{engine} {v['identical']}/{r['results']['templates']}"
                                              for engine, v in e.items())
                     + f" templates as transformers renders them (`render_parity.py`, {r['commit']}).")
    return "\n".join(_wrap(" ".join(parts)))


def _wrap(text: str, width: int = 100) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


WRITERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "analysis_speed": analysis_speed, "parse_speed": parse_speed, "parse_instructions": parse_instructions,
    "render_parity": render_parity}


def load_results(folder: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every saved benchmark result in ``folder``, by benchmark name."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def blocks(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each block's text, by name: one per saved benchmark this module writes, and the headline."""
    out = {name: WRITERS[name](saved) for name, saved in results.items() if name in WRITERS}
    out["headline"] = headline(results)
    return out


def fill(text: str, content: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with each ``bench:NAME`` block it holds replaced by ``content[NAME]``, and the names
    of blocks it holds that ``content`` lacks (a benchmark with no saved result)."""
    missing = []

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in content:
            missing.append(name)
            return m.group(0)
        return f"<!-- bench:{name} -->\n{content[name]}\n<!-- /bench:{name} -->"

    return re.sub(r"<!-- bench:([\w-]+) -->\n.*?<!-- /bench:\1 -->", sub, text, flags=re.S), missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check that the documents say what the results hold")
    args = ap.parse_args(argv)
    content = blocks(load_results())
    stale, missing = [], []
    for path in (DOC, README):
        old = path.read_text(encoding="utf-8")
        new, lacking = fill(old, content)
        missing += [f"{path.name}: {name}" for name in lacking]
        if new != old:
            stale.append(path.name)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if missing:
        print("no saved result for: " + ", ".join(missing), file=sys.stderr)
        return 1
    if args.check and stale:
        print("figures differ from benchmarks/results (run python -m chat_autoparser.tools.benchmark_figures): " + ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
