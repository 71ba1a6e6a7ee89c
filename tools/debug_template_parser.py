"""``debug-template-parser PATH``: show what the analysis learned about one chat template.

Exit codes: 0 analyzed, 1 analysis error, 2 bad input (missing file, not a template).

Example::

    $ debug-template-parser templates/chatml-think.jinja
    $ debug-template-parser model_dir/ --json
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from analyzer import analyze_template, load_template
from analyzer.errors import AnalysisError, ChatAutoparserError, TemplateError
from analyzer.markers import visible
from analyzer.render import ENGINES
from analyzer.structures import TemplateAnalysis

EXIT_OK, EXIT_ANALYSIS, EXIT_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="debug-template-parser",
                                description="Analyze a chat template and show how its model writes reasoning, "
                                            "content and tool calls.")
    p.add_argument("path", help=".jinja file, tokenizer_config.json, chat_template.json, model directory or .gguf")
    p.add_argument("--json", action="store_true", help="print the TemplateAnalysis as JSON")
    p.add_argument("--engine", choices=ENGINES, default="jinja2", help="rendering engine (default: jinja2)")
    p.add_argument("--template-name", help="pick a named template (tokenizer_config with several templates)")
    p.add_argument("--bos", help="bos_token to render with (a bare .jinja has none)")
    p.add_argument("--eos", help="eos_token to render with (a bare .jinja has none)")
    return p


def _mark(text: str) -> str:
    return visible(text)


def render_report(a: TemplateAnalysis) -> Any:
    """A rich renderable for one analysis."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    def markers_table(title: str, rows: list[tuple[str, str]]) -> Table:
        t = Table(title=title, show_header=False, title_justify="left", expand=False)
        t.add_column("field", style="bold")
        t.add_column("value")
        for k, v in rows:
            t.add_row(k, Text(v))
        return t

    caps = a.caps
    cap_rows = [(name, "yes" if getattr(caps, name) else "no") for name in (
        "supports_system_role", "supports_tools", "supports_tool_calls", "supports_tool_responses",
        "supports_parallel_tool_calls", "requires_object_arguments", "requires_string_arguments",
        "requires_nonnull_content", "supports_thinking_toggle")]
    cap_rows += [("content_format", caps.content_format), ("reasoning_field", caps.reasoning_field or "-"),
                 ("thinking_controls", ", ".join(caps.thinking_controls) or "-")]
    cs = a.content_structure
    p1 = [("reasoning_mode", cs.reasoning_mode.value), ("reasoning_start", _mark(cs.reasoning_start)),
          ("reasoning_end", _mark(cs.reasoning_end)), ("found by", cs.reasoning_source or "-"),
          ("past reasoning kept", cs.reasoning_kept or "-"), ("content_mode", cs.content_mode.value),
          ("content_start", _mark(cs.content_start)), ("content_end", _mark(cs.content_end))]
    turns = [("assistant_start", _mark(a.assistant_start)), ("end_of_turn", _mark(a.end_of_turn)),
             ("generation_prompt", _mark(a.generation_prompt)),
             ("generation_prompt (thinking)", _mark(a.generation_prompt_thinking))]
    settings = Table(title="Thinking settings", title_justify="left")
    settings.add_column("setting")
    settings.add_column("reasoning mode")
    settings.add_column("generation prompt")
    for s in a.thinking_settings:
        settings.add_row(s.name, s.reasoning_mode.value, Text(_mark(s.generation_prompt)))
    parts: list[Any] = [markers_table("Capabilities", cap_rows), markers_table("Reasoning and content", p1),
                        markers_table("Turns", turns), settings]
    if a.probe_failures:
        ft = Table(title="Probes the template refused or failed", title_justify="left")
        ft.add_column("probe")
        ft.add_column("kind")
        ft.add_column("error")
        for f in a.probe_failures:
            ft.add_row(f.probe, f.kind, Text(f.error))
        parts.append(ft)
    if a.fallback_renders:
        parts.append(Text("Rendered by a fallback engine:\n  " + "\n  ".join(a.fallback_renders)))
    if a.notes:
        parts.append(Text("Notes:\n  " + "\n  ".join(a.notes)))
    legend = Text("markers: ↵ newline, · space, ⇥ tab, ∅ empty", style="dim")
    return Panel(Group(*parts, legend), title=f"{a.template}  (sha256 {a.sha256[:12]}…, {a.engine})")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tokens = {k: v for k, v in (("bos_token", args.bos), ("eos_token", args.eos)) if v is not None}
    try:
        loaded = load_template(args.path, template_name=args.template_name, special_tokens=tokens or None)
        analysis = analyze_template(loaded, engine=args.engine)
    except TemplateError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except AnalysisError as e:
        print(f"analysis error: {e}", file=sys.stderr)
        return EXIT_ANALYSIS
    except ChatAutoparserError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ANALYSIS
    if args.json:
        sys.stdout.write(json.dumps(analysis.to_dict(), ensure_ascii=False, indent=2) + "\n")
        return EXIT_OK
    from rich.console import Console
    Console().print(render_report(analysis))
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
