"""Digest of what the library makes from every corpus template: the analysis JSON and the
generated grammars, for comparing two checkouts (a move that should change nothing)::

    python tests/output_digest.py --checkout /tmp/before --out /tmp/before.tsv
    python tests/output_digest.py --out /tmp/after.tsv
    python tests/output_digest.py --compare /tmp/before.tsv /tmp/after.tsv

Per template (one line each): the sha256 of the analysis JSON (less the engine's name), and of
the GBNF grammar, its laziness, triggers and preserved tokens of ``generate_parser`` with the
benchmark's two tools for thinking on, off and the template's default; or the error's type.
Works on checkouts from before 0.2.0 (two top-level names) too. ``--compare`` prints every
template whose line differs and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}, "days": {"type": "integer"}},
                                               "required": ["city"]}}},
         {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
             "query": {"type": "string"}, "filters": {"type": "array", "items": {"type": "string"}}}}}}]


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
                          ).hexdigest()[:16]


def digest(checkout: Path, corpus: Path) -> list[str]:
    sys.path.insert(0, str(checkout))
    for name in [m for m in sys.modules if m.split(".")[0] in ("chat_autoparser", "analyzer", "generator")]:
        del sys.modules[name]  # (the corpus lookup may have imported this checkout's)
    if (checkout / "chat_autoparser").is_dir():
        from chat_autoparser.analyzer import analyze_template, load_template
        from chat_autoparser.generator import generate_parser
    else:  # a checkout before 0.2.0, with two top-level names
        from analyzer import analyze_template, load_template
        from generator import generate_parser
    lines = []
    rows = [line.split("\t") for line in (corpus / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    for name in sorted(r[0] for r in rows if r and r[0]):
        try:
            analysis = analyze_template(load_template(corpus / name))
        except Exception as e:  # noqa: BLE001 - either side's typed errors
            lines.append(f"{name}\terror {type(e).__name__}")
            continue
        data = analysis.to_dict()
        data.pop("engine", None)
        grammars = []
        for enable in (None, True, False):
            try:
                p = generate_parser(analysis, tools=TOOLS, enable_thinking=enable)
                grammars.append([p.grammar, p.grammar_lazy, p.grammar_triggers, p.preserved_tokens])
            except Exception as e:  # noqa: BLE001
                grammars.append(f"error {type(e).__name__}")
        lines.append(f"{name}\t{_digest(data)}\t{_digest(grammars)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--corpus", type=Path, default=None, help="default: as the tests find it")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        before, after = (dict(line.split("\t", 1) for line in p.read_text().splitlines()) for p in args.compare)
        differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in differ:
            print(f"{k}: {before.get(k)} -> {after.get(k)}")
        print(f"{len(before)} / {len(after)} templates, {len(differ)} differ")
        return 1 if differ else 0
    corpus = args.corpus
    if corpus is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from chat_autoparser.analyzer.corpus import corpus_dir
        corpus = corpus_dir()
    text = "\n".join(digest(args.checkout.resolve(), corpus)) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
