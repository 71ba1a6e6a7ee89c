"""``debug-template-parser PATH``: show what the analysis learned about one chat template.

Exit codes: 0 analyzed, 1 analysis error, 2 bad input (missing file, not a template, a tools
file or output file that cannot be read).

With ``--tools tools.json`` it also shows what a server gets for a request with those tools
(grammar, lazy triggers, preserved tokens, generation prompt); with ``--parse output.txt`` it
parses a model output (``-`` reads stdin) and prints the message, and with ``--chunk N`` the
OpenAI deltas of streaming it N characters at a time. ``--json`` prints plain data: the
analysis alone, or ``{"analysis", "chat_params", "message", "deltas"}`` when those are asked for;
an error is then ``{"error": {"type", "message", "exit"}}`` on stdout. ``--export FMT`` writes
the raw artefact (``hf``, ``edgellm``, ``structural-tag``: JSON; ``gbnf``, ``lark``: grammar
text) to stdout or ``-o FILE``, nothing else. ``--chat-template-kwargs JSON`` renders the request's
prompt with those variables (``{"reasoning_effort": "high"}``) and parses from where it ends.
The template may be a path, a Hugging Face model id (read through ``huggingface_hub``'s cache),
or ``-`` for its text on stdin.

Example::

    $ debug-template-parser templates/chatml-think.jinja
    $ debug-template-parser model_dir/ --json
    $ debug-template-parser templates/chatml-think.jinja --tools tools.json --parse out.txt --chunk 4
    $ debug-template-parser templates/chatml-think.jinja --export hf -o response_template.json
    $ cat chat_template.jinja | debug-template-parser - --export edgellm
    $ debug-template-parser model_dir/ --roundtrip --tokenizer model_dir/tokenizer.json

``--roundtrip`` runs the prefix-cache roundtrip scenarios (string level; token level with
``--tokenizer``); with ``--json`` its report is the ``"roundtrip"`` key.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from chat_autoparser.analyzer import analyze_template
from chat_autoparser.analyzer.hub import load_pretrained
from chat_autoparser.analyzer.load import from_string
from chat_autoparser.analyzer.markers import visible
from chat_autoparser.analyzer.render import ENGINES
from chat_autoparser.analyzer.structures import TemplateAnalysis
from chat_autoparser.generator.export import FORMATS, JSON_FORMATS

from chat_autoparser import __version__
from chat_autoparser.errors import (
    AnalysisError,
    ChatAutoparserError,
    InputError,
    TemplateError,
)

EXIT_OK, EXIT_ANALYSIS, EXIT_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="debug-template-parser",
                                description="Analyze a chat template and show how its model writes reasoning, "
                                            "content and tool calls.")
    p.add_argument("path", help=".jinja file, tokenizer_config.json, chat_template.json, model directory, .gguf, "
                                "a Hugging Face model id, or - for the template's text on stdin")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__} (chat-autoparser)")
    p.add_argument("--json", action="store_true", help="print the TemplateAnalysis as JSON")
    p.add_argument("--engine", choices=ENGINES, default="jinja2", help="rendering engine (default: jinja2)")
    p.add_argument("--template-name", help="pick a named template (tokenizer_config with several templates)")
    p.add_argument("--bos", help="bos_token to render with (a bare .jinja has none)")
    p.add_argument("--eos", help="eos_token to render with (a bare .jinja has none)")
    p.add_argument("--export", choices=FORMATS, help="write this export of the analysis (raw: JSON or grammar "
                                                     "text) and nothing else")
    p.add_argument("-o", "--output", metavar="FILE", help="with --export: write it here (default: stdout)")
    g = p.add_argument_group("request (grammar, triggers, parsing)")
    g.add_argument("--tools", metavar="FILE", help="JSON list of OpenAI tools (or an object with a \"tools\" list)")
    g.add_argument("--tool-choice", choices=("auto", "required", "none"), default="auto")
    g.add_argument("--no-parallel", action="store_true", help="parallel_tool_calls=false")
    g.add_argument("--no-thinking", action="store_true",
                   help="enable_thinking=false (default: the template's own default, kwargs not passed)")
    g.add_argument("--chat-template-kwargs", metavar="JSON", type=_json_object, default=None,
                   help="variables the request's prompt is rendered with (e.g. '{\"reasoning_effort\": \"low\"}'); "
                        "the parser starts where that prompt ends")
    g.add_argument("--parse", metavar="FILE", help="a model output to parse (- for stdin)")
    g.add_argument("--chunk", type=int, metavar="N", help="with --parse: stream it N characters at a time and "
                                                           "show the deltas")
    r = p.add_argument_group("prefix-cache roundtrip")
    r.add_argument("--roundtrip", action="store_true", help="run the roundtrip scenarios: does the next request "
                   "start with this prompt and the model's output? (a table, and the texts where it breaks)")
    r.add_argument("--tokenizer", metavar="FILE", help="with --roundtrip: tokenizer.json (or its folder) or a .gguf "
                   "vocabulary, for token-level verdicts")
    g.add_argument("--strict", action="store_true", help="with --parse: a parse error, or a form the template does not write, is an error (exit 1)")
    return p


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def read_tools(path: str) -> list[dict[str, Any]]:
    """OpenAI tools from a JSON file: a list, or an object with a ``tools`` list."""
    try:
        data = json.loads(open(path, encoding="utf-8").read())
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:
        raise InputError(f"{path}: not JSON ({e})") from None
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("function", t).get("name"), str)
                                              for t in tools):
        raise InputError(f"{path}: expected a list of tools, each with a function name")
    return tools


def read_output(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return open(path, encoding="utf-8").read()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


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
    from chat_autoparser.analyzer.formatter import format_tool_calls
    from chat_autoparser.analyzer.tool_calls import (
        EXAMPLE_CALLS,
        _as_calls,
        template_tool_block,
    )
    from rich.table import Table
    from rich.text import Text

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


def request_report(params: Any, message: dict[str, Any] | None, deltas: list[dict[str, Any]] | None,
                   deviations: Sequence[dict[str, Any]] = ()) -> Any:
    """Rich renderables for a request's parameters and a parsed output (and the forms read in
    it that the template does not write)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    t = Table(title="Request", show_header=False, title_justify="left")
    t.add_column("field", style="bold")
    t.add_column("value")
    t.add_row("generation_prompt", Text(_mark(params.generation_prompt)))
    t.add_row("chat_template_kwargs", Text(json.dumps(params.chat_template_kwargs) or "-"))
    t.add_row("thinking_forced_open", "yes" if params.thinking_forced_open else "no")
    t.add_row("grammar_lazy", "yes" if params.grammar_lazy else "no")
    t.add_row("grammar_triggers", Text(json.dumps(params.grammar_triggers, ensure_ascii=False) or "-"))
    t.add_row("preserved_tokens", Text(" ".join(params.preserved_tokens) or "-"))
    parts: list[Any] = [t]
    if params.grammar:
        parts.append(Panel(Syntax(params.grammar, "ebnf", word_wrap=True), title="GBNF grammar", title_align="left"))
    if message is not None:
        parts.append(Panel(Syntax(json.dumps(message, ensure_ascii=False, indent=2), "json", word_wrap=True),
                           title="Parsed message", title_align="left"))
    if deviations:
        parts.append(Panel(Text("\n".join(f"{d['position']}: {d['message']}" for d in deviations)),
                           title="Read leniently (--strict refuses these)", title_align="left"))
    if deltas is not None:
        parts.append(Panel(Text("\n".join(json.dumps(d, ensure_ascii=False) for d in deltas)),
                           title=f"Deltas ({len(deltas)})", title_align="left"))
    return Group(*parts)


def _parse(params: Any, text: str, chunk: int | None,
           strict: bool) -> tuple[dict[str, Any], list | None, list[dict[str, Any]]]:
    """(message, deltas when streamed in ``chunk``-character pieces, deviations)."""
    from chat_autoparser.generator import as_delta
    stream = params.parser.stream(strict=strict)
    events: list[dict[str, Any]] = []
    for i in range(0, len(text), chunk or max(1, len(text))):
        events += stream.feed(text[i:i + (chunk or len(text))])
    message, tail = stream.finish()
    deltas = [d for d in (as_delta(e) for e in events + tail) if d is not None] if chunk else None
    return message, deltas, stream.deviations


def _fail(args: argparse.Namespace, kind: str, e: BaseException, code: int) -> int:
    """Report an error (as JSON on stdout under ``--json``) and return its exit code."""
    if args.json:
        sys.stdout.write(json.dumps({"error": {"type": type(e).__name__, "message": str(e), "exit": code}},
                                    ensure_ascii=False) + "\n")
    else:
        print(f"{kind}: {e}", file=sys.stderr)
    return code


def _load(args: argparse.Namespace, tokens: dict[str, str]) -> Any:
    if args.path == "-":
        return from_string(sys.stdin.read(), name="<stdin>", special_tokens=tokens or None)
    return load_pretrained(args.path, template_name=args.template_name, special_tokens=tokens or None)


def _request_prompt(loaded: Any, analysis: TemplateAnalysis, tools: Any, kwargs: dict[str, Any]) -> str:
    """The prompt of a one-message request rendered with ``kwargs`` (where the output starts)."""
    from chat_autoparser.generator import ChatTemplate
    ct = ChatTemplate(loaded, analysis=analysis)
    return ct.render([{"role": "user", "content": "Hello."}], tools, **kwargs)


def _export(args: argparse.Namespace, loaded: Any, analysis: TemplateAnalysis, tools: Any,
            request: dict[str, Any]) -> int:
    from chat_autoparser.generator.export import EXPORTERS, export
    options = EXPORTERS[args.export].request_options(request, args.chat_template_kwargs)
    try:
        out = export(analysis, args.export, tools=tools, template=loaded, **options)
    except ChatAutoparserError as e:
        return _fail(args, "export error", e, EXIT_ANALYSIS)
    text = json.dumps(out, ensure_ascii=False, indent=2) + "\n" if args.export in JSON_FORMATS else str(out)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tokens = {k: v for k, v in (("bos_token", args.bos), ("eos_token", args.eos)) if v is not None}
    if args.chunk is not None and (args.chunk < 1 or not args.parse):
        return _fail(args, "error", InputError("--chunk needs --parse and a size of at least 1"), EXIT_INPUT)
    if args.output and not args.export:
        return _fail(args, "error", InputError("-o needs --export"), EXIT_INPUT)
    try:
        tools = read_tools(args.tools) if args.tools else None
        output = read_output(args.parse) if args.parse else None
        loaded = _load(args, tokens)
        analysis = analyze_template(loaded, engine=args.engine)
    except (InputError, TemplateError) as e:
        return _fail(args, "error", e, EXIT_INPUT)
    except AnalysisError as e:
        return _fail(args, "analysis error", e, EXIT_ANALYSIS)
    except ChatAutoparserError as e:
        return _fail(args, "error", e, EXIT_ANALYSIS)
    kwargs = args.chat_template_kwargs or {}
    thinking = kwargs.get("enable_thinking", False if args.no_thinking else None)
    request: dict[str, Any] = {"tool_choice": args.tool_choice, "parallel_tool_calls": not args.no_parallel,
                               "enable_thinking": thinking}
    if args.chat_template_kwargs is not None:
        try:
            request["prompt"] = _request_prompt(loaded, analysis, tools, kwargs)
        except ChatAutoparserError as e:
            return _fail(args, "error", e, EXIT_ANALYSIS)
    if args.export:
        return _export(args, loaded, analysis, tools, request)
    roundtrip = None
    if args.roundtrip:
        from chat_autoparser.generator.verify.roundtrip import check_roundtrip
        try:
            roundtrip = check_roundtrip(loaded, analysis=analysis, tokenizer=args.tokenizer)
        except ChatAutoparserError as e:  # an unusable tokenizer file
            return _fail(args, "error", e, EXIT_INPUT)
    params = message = deltas = None
    deviations: list[dict[str, Any]] = []
    code = EXIT_OK
    if tools is not None or output is not None:
        from chat_autoparser.generator import generate_parser
        params = generate_parser(analysis, tools=tools, chat_template_kwargs=args.chat_template_kwargs, **request)
        if output is not None:
            try:
                message, deltas, deviations = _parse(params, output, args.chunk, args.strict)
            except ChatAutoparserError as e:  # strict: a ParseError names the position
                return _fail(args, "parse error", e, EXIT_ANALYSIS)
    if args.json:
        data: Any = analysis.to_dict()
        if params is not None:
            data = {"analysis": data, "chat_params": params.to_dict()}
            if message is not None:
                data["message"] = message
                data["deviations"] = deviations
            if deltas is not None:
                data["deltas"] = deltas
        if roundtrip is not None:
            data = {"analysis": data} if params is None else data
            data["roundtrip"] = roundtrip.to_dict()
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        return code
    from rich.console import Console
    console = Console()
    console.print(render_report(analysis, loaded))
    if params is not None:
        console.print(request_report(params, message, deltas, deviations))
    if roundtrip is not None:
        from .roundtrip_view import roundtrip_report
        console.print(roundtrip_report(roundtrip))
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
