"""Rendering parity and speed over the template corpus: our jinja2 and minijinja vs transformers.

Run by hand (needs the test extras: transformers, tokenizers; no torch)::

    python benchmarks/render_parity.py [--corpus DIR] [--repeat N] [--limit N]

For every template in ``MANIFEST.tsv`` and every conversation of
``tests/test_render_parity.py`` (shared, so this report and the test check the same
inputs) it renders with transformers' ``apply_chat_template(..., tokenize=False)``, our
jinja2 engine and our minijinja engine, and prints a Markdown summary:

* templates where jinja2 (ours) agrees with transformers on every conversation, and the
  (template, conversation) pairs where both raise, by exception pairing;
* templates where minijinja agrees with transformers on every conversation (both raising
  counts as agreeing), and minijinja's differences grouped by their first differing snippet;
* compile and render time medians for both engines.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chat_autoparser.analyzer.corpus import CorpusError, corpus_dir, corpus_entries  # noqa: E402
ENGINES = ("jinja2", "minijinja")


def _load_parity_module() -> ModuleType:
    """The parity test module, imported by path (tests/ is not a package)."""
    path = ROOT / "tests" / "test_render_parity.py"
    spec = importlib.util.spec_from_file_location("render_parity_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building classes
    spec.loader.exec_module(module)
    return module


P = _load_parity_module()


@dataclass
class EngineStats:
    """What one engine did over the corpus."""

    identical_templates: list[str] = field(default_factory=list)
    differing_templates: list[str] = field(default_factory=list)
    both_raise: Counter[tuple[str, str]] = field(default_factory=Counter)  # (HF type, our type) -> pairs
    causes: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    compile_s: list[float] = field(default_factory=list)
    render_s: list[float] = field(default_factory=list)
    seen_sources: set[str] = field(default_factory=set)


def _error_type(o: Any) -> str:
    return o.detail.split(":", 1)[0]


def cause_key(hf: Any, ours: Any) -> tuple[str, str]:
    """Group key for a disagreement: the first differing snippet, or the pair of failures."""
    if hf.ok and ours.ok:
        i, _, _ = P.first_difference(hf.text, ours.text)
        return f"HF {hf.text[i:i + 24]!r}", f"{ours.text[i:i + 24]!r}"
    left = "HF ok" if hf.ok else f"HF {hf.kind} ({hf.detail[:70]})"
    right = "ok" if ours.ok else f"{ours.kind} ({ours.detail[:90]})"
    return left, right


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def _compile_time(renderer: Any, stats: EngineStats) -> None:
    """Cold compile time; repeated sources hit the engine's cache, so they are not timed."""
    sources = set(renderer.template.variants.values())
    if sources <= stats.seen_sources:
        return
    stats.seen_sources |= sources
    try:
        _, dt = _timed(renderer.compile)
    except Exception:  # noqa: BLE001 - syntax errors are part of the comparison, not of timing
        return
    stats.compile_s.append(dt)


def _render_time(renderer: Any, conv: Any, repeat: int) -> float:
    """Best of ``repeat`` warm renders (the minimum is the least noisy on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        _, dt = _timed(P.render_ours, renderer, conv)
        best = min(best, dt)
    return best


def run_template(corpus: Path, rel: str, stats: dict[str, EngineStats], hf_rendered: dict[str, int],
                 repeat: int) -> None:
    """Compare one template on every conversation, for both engines.

    ``hf_rendered[rel]`` gets the number of conversations transformers renders (the rest it
    refuses, and parity there means refusing too).
    """
    template = P.load_template(corpus / rel)
    tokenizer = P.hf_tokenizer(template)
    with P.pinned_hf_clock():
        hf_outcomes = [P.render_hf(tokenizer, conv) for conv in P.CONVERSATIONS]
    hf_rendered[rel] = sum(o.ok for o in hf_outcomes)
    for engine in ENGINES:
        st = stats[engine]
        renderer = P.our_renderer(template, engine)
        _compile_time(renderer, st)
        agreed = True
        for conv, hf in zip(P.CONVERSATIONS, hf_outcomes):
            ours = P.render_ours(renderer, conv)
            if ours.ok:
                st.render_s.append(_render_time(renderer, conv, repeat))
            if not P.agree(hf, ours):
                agreed = False
                st.causes[cause_key(hf, ours)].append(f"{rel} [{conv.name}]")
            elif not hf.ok:
                st.both_raise[(_error_type(hf), _error_type(ours))] += 1
        (st.identical_templates if agreed else st.differing_templates).append(rel)


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f} ms" if values else "n/a"


def report(stats: dict[str, EngineStats], hf_rendered: dict[str, int], elapsed: float) -> str:
    """The Markdown summary."""
    n_conv = len(P.CONVERSATIONS)
    total = len(hf_rendered)
    few = sorted(rel for rel, n in hf_rendered.items() if n < 5)
    lines = [f"# Render parity vs transformers ({total} templates x {n_conv} conversations)", "",
             "| engine | templates identical to transformers | pairs both raise | compile median "
             "| render median |", "|---|---|---|---|---|"]
    for engine in ENGINES:
        st = stats[engine]
        lines.append(f"| {engine} (ours) | {len(st.identical_templates)}/{total} | "
                     f"{sum(st.both_raise.values())} | {_ms(st.compile_s)} | {_ms(st.render_s)} |")
    lines += ["", f"Wall time {elapsed:.1f} s. Compile: cold, once per distinct source; render: best of "
              "repeats per (template, conversation), successful renders only.", "",
              f"transformers renders {sum(hf_rendered.values())}/{total * n_conv} (template, conversation) pairs; "
              f"{total - len(few)}/{total} templates render at least 5 conversations. Those that render fewer "
              f"refuse the rest ({len(few)}): {', '.join(few) or 'none'}.", ""]
    for engine in ENGINES:
        st = stats[engine]
        lines += [f"## {engine}: pairs where both raise (transformers exception -> ours)", ""]
        lines += [f"- {hf} -> {ours}: {n}" for (hf, ours), n in st.both_raise.most_common()] or ["- none"]
        lines += ["", f"## {engine}: differences from transformers, grouped by cause "
                  f"({len(st.differing_templates)} templates)", ""]
        if not st.causes:
            lines.append("- none")
        for (left, right), where in sorted(st.causes.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(where[:4]) + (f", ... (+{len(where) - 4})" if len(where) > 4 else "")
            lines.append(f"- **{left} vs {right}** — {len(where)} pairs: {shown}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=None, help="corpus dir (default: $AUTOPARSER_CORPUS, "
                    "../shared/corpus or the one fetch-corpus fetched)")
    ap.add_argument("--repeat", type=int, default=5, help="timed renders per (template, conversation)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N templates")
    ap.add_argument("--save", action="store_true", help="keep the figures in benchmarks/results/render_parity.json")
    args = ap.parse_args(argv)
    try:
        corpus = args.corpus or corpus_dir()
        templates = [e.name for e in corpus_entries(corpus)][: args.limit]
    except CorpusError as e:
        print(f"{e}; or pass --corpus DIR", file=sys.stderr)
        return 2
    stats = {engine: EngineStats() for engine in ENGINES}
    hf_rendered: dict[str, int] = {}
    t0 = time.perf_counter()
    for rel in templates:
        run_template(corpus, rel, stats, hf_rendered, args.repeat)
    print(report(stats, hf_rendered, time.perf_counter() - t0))
    if args.save:
        from results import save  # benchmarks/results.py, beside this script
        kept = {"templates": len(hf_rendered), "conversations": len(P.CONVERSATIONS),
                "engines": {e: {"identical": len(st.identical_templates), "differing": sorted(st.differing_templates),
                                "both_raise": sum(st.both_raise.values())} for e, st in stats.items()}}
        print(f"saved to {save('render_parity', [a for a in (argv if argv is not None else sys.argv[1:]) if a != '--save'], kept)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
