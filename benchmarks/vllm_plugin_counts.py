"""The vLLM plugin over the corpus, per call format: every template's own rendered outputs (the
render → parse fixed point's held scenarios) replayed through vLLM's own parsing of a chat
request (``chat_autoparser.integrations.vllm_replay``), one-shot and streamed in 3-token deltas,
against the message the fixed point verified: through vLLM's own chat-completion serving code
(``OpenAIServingChat``'s response and stream generators; ``vllm_replay.serve``), finish reason
included.

Run in a venv with vLLM (``pip install '.[vllm]'``)::

    python benchmarks/vllm_plugin_counts.py [--corpus DIR] [--limit N] [--json FILE]

Prints, per call format (``tool_call_structure.function_format``; "no calls" for templates with
none), templates and scenarios checked, scenarios equal one-shot and streamed, and each failure.

``--hf``: instead, vLLM's own reader of Hugging Face response templates (``--tool-call-parser hf
--reasoning-parser hf``) given our ``export("hf")`` in the tokenizer: per template, not
expressible (our export says why), refused by vLLM's serving check (its message), or replayed
as above (scenarios equal).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chat_autoparser.analyzer import analyze_template, load_template  # noqa: E402
from chat_autoparser.analyzer.corpus import corpus_dir  # noqa: E402
from chat_autoparser.errors import ChatAutoparserError  # noqa: E402
from chat_autoparser.generator.verify.fixed_point import RT_TOOLS, SCENARIOS, fixed_point  # noqa: E402
from chat_autoparser.integrations.vllm_replay import CharTokenizer, request, serve  # noqa: E402


def _message(parsed: dict[str, Any]) -> dict[str, Any]:
    calls = parsed.get("tool_calls") or []
    return {"reasoning": parsed.get("reasoning_content") or None, "content": parsed.get("content") or None,
            "calls": [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--hf", action="store_true", help="vLLM's hf parsers on our export('hf')")
    args = ap.parse_args(argv)
    root = args.corpus or corpus_dir()
    files = [line.split("\t")[0] for line in (root / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    if args.limit:
        files = files[:args.limit]
    stats: dict[str, dict[str, Any]] = defaultdict(lambda: {"templates": 0, "scenarios": 0, "equal": 0,
                                                             "tool_scenarios": 0, "failures": []})
    for name in files:
        try:
            loaded = load_template(root / name)
            analysis = analyze_template(loaded)
        except ChatAutoparserError:
            continue
        fmt = analysis.tool_call_structure.function_format.value if analysis.tool_call_structure.call_parts \
            else "no calls"
        tok = CharTokenizer(loaded.source, loaded.special_tokens)
        parser = "autoparser"
        if args.hf:
            from collections import Counter
            from chat_autoparser.generator.export import NotExpressible, export
            from chat_autoparser.integrations.vllm_replay import parser_class
            verdicts = stats.setdefault("hf verdicts", {"templates": 0, "scenarios": 0, "equal": 0,
                                                        "tool_scenarios": 0, "failures": [], "why": Counter()})
            try:
                tok.response_template = export(analysis, "hf", tools=RT_TOOLS, template=loaded)
                parser_class("hf", tok)
            except NotExpressible as e:
                verdicts["why"][f"not expressible: {str(e).split(': ', 1)[-1][:90]}"] += 1
                continue
            except (TypeError, ValueError) as e:  # vLLM's serving check of the template
                verdicts["why"][f"refused by vLLM: {str(e)[:110]}"] += 1
                continue
            verdicts["why"]["read by vLLM"] += 1
            parser = "hf"
        row = stats[fmt]
        counted = False
        for scenario in SCENARIOS:
            fp = fixed_point(loaded, analysis, scenario)
            if not fp.ok or fp.skipped:
                continue
            counted = True
            tools = list(RT_TOOLS) if fp.with_tools else None
            shot, stream = serve(tok, fp.prompt, fp.generated, request(tools), parser=parser)
            expected = _message(fp.parsed)
            row["scenarios"] += 1
            row["tool_scenarios"] += bool(expected["calls"])
            same = all({k: v for k, v in m.items() if k not in ("ids", "finish_reason")} == expected
                       and m["finish_reason"] == ("tool_calls" if expected["calls"] else "stop") for m in (shot, stream))
            if same and len(set(stream["ids"])) == len(stream["ids"]) and all(stream["ids"]):
                row["equal"] += 1
            else:
                row["failures"].append(f"{name} {scenario}: expected {expected}, one-shot {shot}, streamed {stream}")
        row["templates"] += counted
    verdicts = stats.pop("hf verdicts", None)
    if verdicts is not None:
        print("our export('hf') in vLLM's hf parsers, per template:")
        for why, n in verdicts["why"].most_common():
            print(f"  {n:>4}  {why}")
    print(f"{'call format':<22} {'templates':>9} {'scenarios':>9} {'with calls':>10} {'equal':>7}")
    for fmt, row in sorted(stats.items()):
        print(f"{fmt:<22} {row['templates']:>9} {row['scenarios']:>9} {row['tool_scenarios']:>10} {row['equal']:>7}")
        for failure in row["failures"]:
            print("   ", failure[:400])
    total = {k: sum(r[k] for r in stats.values()) for k in ("templates", "scenarios", "tool_scenarios", "equal")}
    print(f"{'all':<22} {total['templates']:>9} {total['scenarios']:>9} {total['tool_scenarios']:>10} {total['equal']:>7}")
    if args.json:
        args.json.write_text(json.dumps({"per_format": stats, "total": total,
                                         "hf": dict(verdicts["why"]) if verdicts else None}, indent=2), encoding="utf-8")
    return 0 if total["equal"] == total["scenarios"] else 1


if __name__ == "__main__":
    sys.exit(main())
