"""Every exporter over the template corpus, checked by the tool that consumes it.

Run by hand (needs the test extras: transformers for ``parse_response``)::

    python benchmarks/export_counts.py [--corpus DIR] [--limit N] [--jobs N] [--json FILE]

For every template: the HF response template read by transformers' ``parse_response`` on the
render → parse fixed point's outputs, the structural tags compiled by llguidance on the
tool-call outputs, the Edge-LLM JSON against the Jinja output on the standard conversations,
and the GBNF and Lark grammars compiled by llguidance on the tool-call outputs. Prints, per
exporter, how many templates were exported and verified, not expressible (by reason), with
nothing to check, and failing (with the first difference).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chat_autoparser.generator.verify.exports import VERIFIERS  # noqa: E402

FORMATS = tuple(VERIFIERS)  # every export's verdicts (the verifier's own table)


def check_template(path: str) -> dict[str, Any]:
    from chat_autoparser.analyzer import analyze_template, load_template
    from chat_autoparser.errors import ChatAutoparserError
    from chat_autoparser.generator.verify.exports import verify_exports
    from chat_autoparser.generator.verify.fixed_point import SCENARIOS, fixed_point
    try:
        template = load_template(path)
        analysis = analyze_template(template)
    except ChatAutoparserError as e:
        return {"error": str(e)}
    fixed = {s: fixed_point(template, analysis, s) for s in SCENARIOS}
    try:
        verdicts = verify_exports(template, analysis, fixed)
    except Exception as e:  # noqa: BLE001 - a crash is a failure to report, not to hide
        return {fmt: {"status": "failing", "reason": f"crashed: {type(e).__name__}: {e}", "checked": 0, "details": []}
                for fmt in FORMATS}
    return {fmt: {"status": v.status, "reason": v.reason, "checked": v.checked, "details": v.details[:3]}
            for fmt, v in verdicts.items()}


def _reason_key(reason: str) -> str:
    return re.sub(r"'[^']*'|\"[^\"]*\"", "…", reason)[:140]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every template's verdicts here")
    ap.add_argument("--only", help="templates whose name contains this")
    args = ap.parse_args(argv)
    from chat_autoparser.analyzer.corpus import corpus_dir, corpus_entries
    root = args.corpus or corpus_dir()
    entries = corpus_entries(root)
    if args.only:
        entries = [e for e in entries if args.only in e.name]
    if args.limit:
        entries = entries[:args.limit]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(zip((e.name for e in entries), pool.map(check_template, [str(e.path) for e in entries])))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    errors = sum(1 for r in results.values() if "error" in r)
    print(f"{len(results)} templates ({errors} without an analysis)\n")
    for fmt in FORMATS:
        counts: Counter[str] = Counter()
        reasons: dict[str, Counter[str]] = defaultdict(Counter)
        for name, r in results.items():
            if "error" in r:
                continue
            v = r[fmt]
            counts[v["status"]] += 1
            if v["status"] in ("not_expressible", "failing"):
                reasons[v["status"]][_reason_key(v["reason"])] += 1
        print(f"## {fmt}: " + ", ".join(f"{k} {counts[k]}" for k in ("verified", "not_expressible", "nothing", "failing")))
        for status in ("not_expressible", "failing"):
            for reason, n in reasons[status].most_common():
                print(f"- {status} ({n}): {reason}")
        if reasons["failing"]:
            print("  failing templates: " + ", ".join(n for n, r in results.items()
                                                      if "error" not in r and r[fmt]["status"] == "failing"))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
