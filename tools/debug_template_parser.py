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


def _parts_text(parts: Any) -> str:
    out = []
    for p in parts:
        if p.kind == "lit":
            out.append(_mark(p.text))
        elif p.kind == "typed":
            out.append("{" + " | ".join(f"{t}: {_mark(v)}" for t, v in p.by_type) + "}")
        elif p.kind == "index":
            out.append(f"⟨index from {p.text or 0}⟩")
        else:
            out.append(f"⟨{p.kind}⟩")
    return "".join(out)


def tool_section(a: TemplateAnalysis, template: Any) -> list[Any]:
    """Rich renderables for the tool-call structure, with one example call written by the
    formatter next to the template's own rendering."""
    from rich.table import Table
    from rich.text import Text

    from analyzer.formatter import format_tool_calls
    from analyzer.tools import EXAMPLE_CALLS, _as_calls, template_tool_block

    ts = a.tool_call_structure
    t = Table(title="Tool calls", show_header=False, title_justify="left")
    t.add_column("field", style="bold")
    t.add_column("value")
    if not ts.supports_tools:
        t.add_row("supported", "no")
        t.add_row("why", Text(ts.reason or "-"))
        return [t]
    vf = ", ".join(f"{k}: {v.kind}{' raw' if v.raw_strings else ''}" for k, v in ts.value_formats)
    rows = [("format", ts.function_format.value), ("arguments", f"{ts.argument_format.value} ({ts.args_mode})"),
            ("section", f"{_mark(ts.tool_section_start)} … {_mark(ts.tool_section_end)}"),
            ("one call", _parts_text(ts.call_parts)), ("between calls", _mark(ts.call_separator)),
            ("parallel calls", "yes" if ts.supports_parallel else "no")]
    if ts.args_mode == "tagged":
        rows += [("one argument", _parts_text(ts.arg_parts)), ("between arguments", _mark(ts.arg_separator)),
                 ("value formats", vf)]
    else:
        fmt = ts.args_format
        rows.append(("argument JSON", f"{fmt.kind}, separators {fmt.item_sep!r}/{fmt.kv_sep!r}"
                                      f"{', ascii' if fmt.ensure_ascii else ''}{', sorted' if fmt.sort_keys else ''}"))
    for field in ("name_field", "args_field", "id_field", "function_prefix", "function_suffix", "function_close",
                  "per_call_start", "function_namespace", "args_marker", "per_call_end", "id_marker"):
        value = getattr(ts, field)
        if value:
            rows.append((field, _mark(value)))
    rows += [("content before calls", f"yes, then {_mark(ts.content_separator)}" if ts.calls_after_content else "no"),
             ("reasoning kept on tool turns", "yes" if ts.reasoning_on_tool_turns else "no"),
             ("verified probes", f"{len(ts.verified)} reproduced byte for byte"
                                 + (f", {len(ts.unverified)} not" if ts.unverified else ""))]
    for k, v in rows:
        t.add_row(k, Text(v))
    for probe, why in ts.unverified:
        t.add_row(f"  ✗ {probe}", Text(why))
    out: list[Any] = [t]
    if template is not None:
        mine = format_tool_calls(ts, _as_calls(EXAMPLE_CALLS))
        theirs = template_tool_block(template, a, EXAMPLE_CALLS)
        ex = Table(title="Example call", title_justify="left", show_header=True)
        ex.add_column("written by")
        ex.add_column("text")
        ex.add_row("formatter", Text(mine))
        ex.add_row("template", Text(theirs if theirs is not None else "(template refused the example)"))
        ex.add_row("same", "yes" if mine == theirs else "NO")
        out.append(ex)
    return out


def render_report(a: TemplateAnalysis, template: Any = None) -> Any:
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
                        markers_table("Turns", turns), settings, *tool_section(a, template)]
    if a.probe_failures:
        ft = Table(title="Probes the template refused or failed", title_justify="left")
        ft.add_column("probe")
        ft.add_column("kind")
        ft.add_column("error")
        for f in a.probe_failures:
            ft.add_row(Text(f.probe), f.kind, Text(f.error))
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
    Console().print(render_report(analysis, loaded))
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
