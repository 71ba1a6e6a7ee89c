"""How ``debug-template-parser --roundtrip`` shows a roundtrip report: a table (scenario × string
and token verdict × diagnosis), then for each failure the two texts aligned at the first difference.

Example::

    >>> aligned("ab</think>\\nxy", "ab</think>xy", 10)
    ['  output + prompt: …ab</think>↵xy…', '  next prompt:     …ab</think>xy…', '                              ^']
"""

from __future__ import annotations

from typing import Any

from chat_autoparser.analyzer.markers import visible

MARK = {True: "[green]ok[/]", False: "[red]broken[/]", None: "[dim]n/a[/]"}

def _show(text: str) -> str:
    return visible(text).replace("\n", "↵")


def aligned(expected: str, got: str, at: int) -> list[str]:
    """Three lines: the output side, the next prompt, a caret under their first difference (``at``
    is the difference's offset within both texts)."""
    head = _show(expected[:at])
    return [f"  output + prompt: …{head}{_show(expected[at:])}…", f"  next prompt:     …{head}{_show(got[at:])}…",
            " " * (len("  output + prompt: …") + len(head)) + "^"]


def roundtrip_report(report: Any) -> Any:
    """A rich renderable of a :class:`~chat_autoparser.generator.verify.roundtrip.RoundtripReport`."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text
    table = Table(title=f"prefix-cache roundtrip ({report.tokenizer or 'string level only: no --tokenizer'})")
    for col in ("scenario", "setting", "string", "token", "diagnosis / why not applicable"):
        table.add_column(col)
    for r in report.results:
        setting = ", ".join(f"{k}={v}" for k, v in r["kwargs"].items()) or "default"
        why = r["diagnosis"] or (r["evidence"] if r["string_prefix"] is None else "")
        table.add_row(r["scenario"], setting, MARK[r["string_prefix"]], MARK[r["token_prefix"]], why)
    parts: list[Any] = [table]
    for r in report.failures():
        parts.append(Text(f"\n{r['scenario']} ({r['diagnosis']}): {r['evidence']}"))
        a, b = r["expected"], r["got"]  # windows around the difference, cut at the same offset
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        parts.append(Text("\n".join(aligned(a, b, at)), no_wrap=True, overflow="ellipsis"))
    return Group(*parts)
