"""Golden files: the analysis of every corpus template, as reviewed JSON.

``python tests/update_golden.py`` rewrites them; ``test_golden.py`` fails when an analysis no
longer matches its file. Changed files are read by eye before they are committed.
"""

from __future__ import annotations

import json
from pathlib import Path

from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.analyzer.structures import TemplateAnalysis

GOLDEN_DIR = Path(__file__).parent / "golden"


def golden_path(corpus_name: str) -> Path:
    """``llama.cpp/Qwen3.5-4B.jinja`` → ``tests/golden/llama.cpp/Qwen3.5-4B.json``."""
    return GOLDEN_DIR / Path(corpus_name).with_suffix(".json")


def golden_record(result: TemplateAnalysis | ChatAutoparserError) -> dict:
    if isinstance(result, TemplateAnalysis):
        return {"analysis": result.to_dict()}
    return {"error": {"type": type(result).__name__, "message": str(result)}}


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
