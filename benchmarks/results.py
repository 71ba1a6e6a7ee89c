"""Where a benchmark keeps what it measured: one JSON file per benchmark in ``benchmarks/results/``.

A benchmark run with ``--save`` writes its figures there, with the command that measured them,
the commit it ran on (``+dirty`` when the working tree had changes), the date and the machine.
``python -m chat_autoparser.tools.benchmark_figures`` writes the tables of ``docs/benchmarks.md`` and the README's
headline figures from these files, and a test checks that the documents say what the files hold:
no figure in the documents is copied by hand.

Example::

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = save("demo", ["--limit", "3"], {"median_ms": 1.5}, folder=Path(d))
    ...     data = load("demo", folder=Path(d))
    >>> path.name, data["command"], data["results"]
    ('demo.json', 'python benchmarks/demo.py --limit 3', {'median_ms': 1.5})
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "benchmarks" / "results"


def commit() -> str:
    """The checkout's commit, with ``+dirty`` when tracked files differ from it (``unknown``
    outside a git checkout)."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    """What the figures depend on besides the code: CPUs, their model, Python."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model or platform.processor(), "python": platform.python_version(),
            "system": platform.system()}


def save(name: str, argv: Sequence[str], results: dict[str, Any], folder: Path = FOLDER) -> Path:
    """Write ``results`` of benchmark ``name`` (run with ``argv``) to ``folder/name.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": name, "command": shlex.join(["python", f"benchmarks/{name}.py", *argv]),
            "commit": commit(), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "machine": machine(), "results": results}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load(name: str, folder: Path = FOLDER) -> dict[str, Any]:
    """What :func:`save` wrote for benchmark ``name``."""
    return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
