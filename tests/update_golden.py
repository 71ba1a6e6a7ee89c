"""Rewrite tests/golden/ from the current analysis of every corpus template.

Usage: python tests/update_golden.py [--only SUBSTRING]
Prints which files changed; read those by eye before committing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from golden_io import dumps, golden_path, golden_record  # noqa: E402

from chat_autoparser.analyzer import analyze_template  # noqa: E402
from chat_autoparser.analyzer.corpus import corpus_entries  # noqa: E402
from chat_autoparser.errors import ChatAutoparserError  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    changed = added = 0
    for entry in corpus_entries():
        if args.only and args.only not in entry.name:
            continue
        try:
            result = analyze_template(entry.path)
        except ChatAutoparserError as e:
            result = e
        text = dumps(golden_record(result))
        path = golden_path(entry.name)
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if old is None:
                added += 1
            else:
                changed += 1
                print(f"changed: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    print(f"{added} added, {changed} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
