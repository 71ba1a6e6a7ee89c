"""The prefix-cache roundtrip over the whole corpus: pass/fail per scenario and per diagnosis at string
level, at token level for every template with a fitting vocabulary, and the bridge check there.

A vocabulary fits a template when the markers that frame its turns are special tokens of it
(:func:`~chat_autoparser.generator.prefix.tokens.fits`); the vocabularies are llama.cpp's test GGUFs
(``fetch-corpus``) and any ``tokenizer.json`` or folder given with ``--tokenizer``.

Usage::

    python -m chat_autoparser.tools.roundtrip_report [--jobs 4] [--tokenizer DIR_OR_FILE ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from chat_autoparser.analyzer.corpus import CorpusError, corpus_entries, vocab_dir
from chat_autoparser.errors import ChatAutoparserError


def _tokenizer_sources(extra: list[str]) -> list[str]:
    try:
        found = [str(p) for p in sorted(vocab_dir().glob("ggml-vocab-*.gguf"))]
    except CorpusError:
        found = []
    return found + extra


_TOKS: dict[str, Any] = {}


def _tokenizers(sources: list[str]) -> dict[str, Any]:
    from chat_autoparser.generator.prefix.tokens import TokenizerError, load_tokenizer
    for s in sources:
        if s not in _TOKS:
            try:
                _TOKS[s] = load_tokenizer(s)
            except TokenizerError:
                _TOKS[s] = None  # a vocabulary transformers cannot convert
    return {s: t for s, t in _TOKS.items() if s in sources and t is not None}


def _rendered(t: Any, a: Any) -> str:
    """A tool conversation as the template renders it (its markers decide which vocabulary fits)."""
    from chat_autoparser.generator.prefix.conversation import Conversation, tool_message, answer_calls
    from chat_autoparser.generator.verify.scenarios import ONE, RESULTS, TOOLS, USER, assistant
    conv = Conversation(t, a, TOOLS)
    msg = assistant(conv, False, [ONE] if conv.tools else [], content=None if conv.tools else "Hi")
    after = answer_calls([tool_message(0, RESULTS[0])], msg.get("tool_calls") or []) if conv.tools else []
    return conv.render([{"role": "user", "content": USER}, conv.as_template_message(msg)] + after, {},
                       generation_prompt=True) or ""


def one(path: str, sources: list[str]) -> dict[str, Any]:
    """The roundtrip of one template: string-level results, and with a fitting vocabulary the
    token-level results and the bridge check."""
    from chat_autoparser.analyzer import analyze_template, load_template
    from chat_autoparser.generator.prefix.conversation import turn_markers
    from chat_autoparser.generator.prefix.tokens import fits
    from chat_autoparser.generator.verify.bridge_check import BridgeBroke, check_bridge
    from chat_autoparser.generator.verify.roundtrip import check_roundtrip
    out: dict[str, Any] = {"template": path}
    try:
        t = load_template(path)
        a = analyze_template(t, engine="jinja2")
        out["string"] = check_roundtrip(t, analysis=a).results
        framing = turn_markers(a, _rendered(t, a))
        tok = next((s for s, tk in _tokenizers(sources).items() if fits(tk, framing)), None)
        if tok is not None:
            out["vocab"] = Path(tok).name
            out["token"] = check_roundtrip(t, analysis=a, tokenizer=_TOKS[tok]).results
            try:
                b = check_bridge(t, analysis=a, tokenizer=_TOKS[tok])
                out["bridge"] = {"ok": b.ok, "turns": b.turns, "same": b.same_text, "safe": b.safe,
                                 "skipped": b.skipped, "difference": b.first_difference}
            except BridgeBroke as e:
                out["bridge"] = {"ok": False, "broke": str(e)}
            except ChatAutoparserError as e:
                out["bridge"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    except ChatAutoparserError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per scenario (pass/fail/not applicable) and per diagnosis, string and token level,
    and the bridge's."""
    summary: dict[str, Any] = {"templates": len(rows), "errors": sum("error" in r for r in rows)}
    for level, key in (("string", "string_prefix"), ("token", "token_prefix")):
        per: dict[str, Counter] = {}
        diag: Counter = Counter()
        for r in rows:
            for res in r.get(level) or []:
                v = res[key]
                per.setdefault(res["scenario"], Counter())["n/a" if v is None else "pass" if v else "fail"] += 1
                if v is False:
                    diag[res["diagnosis"]] += 1
        summary[level] = {"templates": sum(level in r for r in rows),
                          "scenarios": {k: dict(c) for k, c in per.items()}, "diagnoses": dict(diag)}
    bridged = [r["bridge"] for r in rows if "bridge" in r]
    summary["bridge"] = {"templates": len(bridged), "ok": sum(b["ok"] for b in bridged),
                         "skipped": sum(bool(b.get("skipped")) for b in bridged),
                         "broke": sum("broke" in b for b in bridged), "errors": sum("error" in b for b in bridged),
                         "turns": sum(b.get("turns", 0) for b in bridged),
                         "turns_same_text": sum(sum(b.get("same", [])) for b in bridged),
                         "turns_safe": sum(sum(b.get("safe", [])) for b in bridged)}
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tokenizer", action="append", default=[], help="a tokenizer.json or a folder holding one")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--limit", type=int, default=0, help="only the first N templates")
    args = ap.parse_args(argv)
    paths = [str(e.path) for e in corpus_entries()]
    paths = paths[:args.limit] if args.limit else paths
    sources = _tokenizer_sources(args.tokenizer)
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, paths, [sources] * len(paths), chunksize=4))
    summary = summarize(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, default=str))
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
