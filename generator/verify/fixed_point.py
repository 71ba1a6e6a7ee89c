"""Render → parse fixed point (oracle 2) and reconstructability.

For a scenario message M: render the conversation ending with M, cut out what the model would
have generated (everything after the generation prompt), parse it with the generated parser,
and compare with M. What the template itself drops (reasoning it never renders, ids it
ignores) is not expected back; :class:`FixedPoint` records it as ``template_drops`` so losses are
reported, not hidden.

Example::

    >>> from chat_autoparser.analyzer import analyze_template, load_template
    >>> t = load_template("templates/chatml-think.jinja")
    >>> r = fixed_point(t, analyze_template(t), "reasoning+content")
    >>> r.ok, r.template_drops
    (True, ())
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chat_autoparser.analyzer import probes as P
from chat_autoparser.analyzer.caps import ToolProbeForms, tool_call_messages, tool_forms
from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.analyzer.formatter import format_tool_calls
from chat_autoparser.analyzer.instructions import read_instructions
from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.markers import is_closing, is_marker, markers_in, pairs, tokenize
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.analyzer.structures import ReasoningMode, TemplateAnalysis
from chat_autoparser.analyzer.tool_calls import tools_section

from ..params import generate_parser
from ..state import thinking_setting
from .applicability import reasoning_line, source_facts

# Described and typed the way real tool definitions are: some templates print every parameter's
# description and item type unguarded.
RT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name"},
                                          "days": {"type": "integer", "description": "Days ahead"},
                                          "metric": {"type": "boolean", "description": "Metric units"}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_docs", "description": "Search the documents.",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string", "description": "Search terms"},
                                          "filters": {"type": "object", "additionalProperties": {},
                                                      "description": "Field filters"},
                                          "limit": {"type": "number", "description": "Result limit"},
                                          "tags": {"type": "array", "items": {"type": "string"},
                                                   "description": "Tags to match"}},
                                          "required": ["query"]}}},
]
WEATHER = ("get_weather", {"city": "Paris", "days": 3, "metric": True}, "callA0001")
SEARCH = ("search_docs", {"query": "chat templates", "limit": 2.5}, "callB0002")
TRICKY = ("search_docs", {"query": 'Zürich "quoted"\nline two\t\\ <b>&</b> 日本語 🎉',
                          "filters": {"nested": {"list": [1, 2.5, True, None, "x"]}, "empty": {}},
                          "limit": -7, "tags": ["a", "b"]}, "callC0003")

CONTENT = "The answer is 42."
QUESTION = "What is the weather in Paris?"
REASONING = "First, think it through."

# skips decided by the template's own renders and source (applicability.py)
NO_TOOLS = "template renders neither tool calls nor tools"
NO_REASONING = "template writes no reasoning"
CLOSED_REASONING = "the template closes the reasoning block in every generation prompt (the model cannot reason)"

SCENARIOS = ("content", "reasoning+content", "tool_call", "parallel_tool_calls", "content+tool_calls",
             "reasoning+tool_calls", "tricky_arguments", "empty_arguments")


@dataclass
class FixedPoint:
    scenario: str
    ok: bool
    skipped: str = ""                  # why the scenario does not apply
    template_drops: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    generated: str = ""
    parsed: dict[str, Any] = field(default_factory=dict)
    # reconstructability: the history rendered with the parsed message equals the history
    # rendered with the raw output (None: not checked, e.g. the template refuses the message)
    reconstructs: bool | None = None
    reconstruct_diff: str = ""
    # the request the output was parsed under: generate_parser(analysis, tools=RT_TOOLS if
    # with_tools else None, enable_thinking=enable_thinking)
    enable_thinking: bool = True
    with_tools: bool = False
    prompt: str = ""  # the rendered prompt the output continues
    # how the output was had: "render", the history's render continues the prompt; "splice", the
    # history's turn spliced onto the prompt (``spliced_text``; nothing to reconstruct);
    # "instructions", the turn whose text is the call the instructions spell; "+markers", the
    # reasoning the template drops written by the analysis' markers (``with_reasoning``)
    via: str = "render"


def _scenario_message(name: str, forms: ToolProbeForms, nonnull: bool) -> dict[str, Any] | None:
    empty = "" if nonnull else None
    if name == "content":
        return P.assistant(CONTENT)
    if name == "reasoning+content":
        return P.assistant(CONTENT, reasoning_content=REASONING)
    if name == "tool_call":
        return tool_call_messages(forms, [WEATHER], content=empty)
    if name == "parallel_tool_calls":
        return tool_call_messages(forms, [WEATHER, SEARCH], content=empty)
    if name == "content+tool_calls":
        return tool_call_messages(forms, [WEATHER], content=CONTENT)
    if name == "reasoning+tool_calls":
        return tool_call_messages(forms, [WEATHER], content=empty, reasoning_content=REASONING)
    if name == "tricky_arguments":
        return tool_call_messages(forms, [TRICKY], content=empty)
    if name == "empty_arguments":
        return tool_call_messages(forms, [("get_weather", {}, "callD0004")], content=empty)
    return None


def turn_renders(prober: Prober, message: dict[str, Any], tools: Any,
                 kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(the prompt with the generation prompt, the conversation ending with ``message``), or
    None when the template refuses either."""
    base = [P.user(QUESTION)]
    key = repr(sorted(kwargs.items()))
    prompt = prober.render(f"roundtrip:prompt{key}", base, tools=tools, add_generation_prompt=True, **kwargs)
    full = prober.render(f"roundtrip:message{key}", base + [message], tools=tools, **kwargs)
    return None if prompt is None or full is None else (prompt, full)


def generated_text(prober: Prober, message: dict[str, Any], tools: Any,
                   kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(prompt, generated) when the render of the conversation ending with ``message``
    continues the generation prompt exactly (None otherwise, or if the template refuses it)."""
    renders = turn_renders(prober, message, tools, kwargs)
    if renders is None or not renders[1].startswith(renders[0]):
        return None
    return renders[0], renders[1][len(renders[0]):]


def spliced_text(analysis: TemplateAnalysis, prompt: str, full: str, wants_reasoning: bool,
                 forced_open: bool = False, generation_prompt: tuple[str, ...] | None = None) -> str | None:
    """What a model writes after ``prompt`` when the render of the history (``full``) does not
    continue it: the history's turn from where its header ends, onto the prompt.

    From where the two renders part, the prompt adds its own text (a header the history writes
    otherwise, a system block or a user-side flag placed before the new turn, a reasoning block
    the history leaves out) and the history writes its turn. The turn's body starts after the
    longest tail of the prompt's text (a reasoning block at its very end aside) that the turn also
    writes as whole tokens, or right where the two part when the turn writes none of it and the
    prompt's text ends the prompt whatever the turn (``generation_prompt``: renders it ends, what
    add_generation_prompt adds and the bare prompt; the analysis' generation prompts when not
    given). A block the template writes after the last turn and the prompt before its header is
    not the model's. A reasoning block the prompt leaves open (``forced_open``: the prompt's last line names reasoning with no
    marker) is closed by the analysis' own end marker, with the scenario's reasoning inside; after
    a block the prompt closes, the model goes on with the turn. None when the turn is empty, is
    written inside another turn or a restated conversation, or writes a reasoning block of its own
    after other text or inside the block the prompt closed.

    Example::

        >>> from chat_autoparser.analyzer import analyze_template
        >>> a = analyze_template("templates/chatml-think.jinja")
        >>> spliced_text(a, "<|im_start|>assistant\\n<think>\\n", "<|im_start|>assistant\\nHi<|im_end|>\\n", False)
        '\\n</think>\\nHi<|im_end|>\\n'
        >>> spliced_text(a, "<|im_start|>assistant\\n", "<|im_start|>model\\n<|im_start|>assistant\\nHi<|im_end|>\\n", False)
        'Hi<|im_end|>\\n'
    """
    cs = analysis.content_structure
    start, end = cs.reasoning_start.strip(), cs.reasoning_end.strip()
    cut = common_prefix_len(prompt, full)
    at = 0
    for tok in tokenize(prompt):  # (back to where a token of the prompt starts: ``<t`` of ``<think>``)
        if at + len(tok) > cut:
            break
        at += len(tok)
    added, turn = prompt[at:], full[at:]
    if not turn.strip():
        return None
    core, block = _reasoning_tail(added, start, end)
    opened = block == "open" or (forced_open and block == "")
    prompts = set(generation_prompt) if generation_prompt is not None else analysis.generation_prompts()
    turn = _after_header(core, turn, within_prompt=not core.strip() or any(p.endswith(core) for p in prompts))
    if turn is None:
        return None
    turn = _without_closing_block(turn, prompt[_marker_run_start(prompt, at):])
    if QUESTION in turn:  # the turn is written inside a restatement of the conversation (a judge's prompt)
        return None
    body = turn.lstrip()
    if opened:
        if start and body.startswith(start):  # the history writes the block itself: the model goes on inside it
            return body[len(start):]
        if not end:
            return None
        if end in body:  # the history writes the rest of the block (its reasoning, or none) and closes it
            written = turn[:turn.index(end)]
            if start and start in written:  # a whole block of its own after other text: no telling
                return None
            return (REASONING if wants_reasoning and REASONING not in written else "") + turn
        return (REASONING if wants_reasoning else "") + cs.reasoning_end + turn
    if block == "closed":  # the model goes on after the block the prompt closed
        own = start and body.startswith(start)
        if end and (own or body.startswith(end)) and end in body:  # the history writes one too
            inner = body[len(start):body.index(end)] if own else ""
            return None if inner.strip() else body[body.index(end) + len(end):]
        if end and end in turn:  # reasoning inside a block the prompt closed empty
            return None
    return turn


def _opens_reasoning(prompt: str) -> bool:
    """Whether the prompt's last line names reasoning and closes nothing (``Here are my reasoning
    steps:``): the model starts inside reasoning though no marker opens it."""
    last = reasoning_line(prompt)
    return last is not None and not any(is_closing(m) for m in markers_in(last))


def _reasoning_tail(added: str, start: str, end: str) -> tuple[str, str]:
    """``added`` without the reasoning block at its very end, and that block's state: "open"
    (a start marker with no end after it), "closed" (an empty block, or an end marker alone), or
    "" (none)."""
    s = added.rfind(start) if start else -1
    e = added.rfind(end) if end else -1
    if s > e:
        return added[:s], "open"
    if e >= 0 and not added[e + len(end):].strip():
        head = added[:e]
        if start and head.rstrip().endswith(start):
            head = head.rstrip()[:-len(start)]
        return head, "closed"
    return added, ""


# The shortest tail of the prompt's text that places the turn's header (two characters: one
# letter or bracket alone places nothing).
MIN_HEADER_TAIL = 2


def _without_closing_block(turn: str, written_before: str) -> str:
    """``turn`` without the longest tail that the prompt writes before the new turn and that
    starts with a marker: a block the template writes at the end of the conversation (tool
    instructions, say), after the last turn in the history and before the generation prompt in
    the prompt, is not the model's."""
    at = 0
    for tok in tokenize(turn):
        if is_marker(tok) and turn[at:].rstrip() in written_before:
            return turn[:at]
        at += len(tok)
    return turn


def _marker_run_start(text: str, at: int) -> int:
    """Where the run of markers that ends at ``at`` starts (``at`` itself when none ends there):
    the block the prompt writes before the new turn may start with markers the history also
    writes after the last turn."""
    start, pos = at, 0
    for tok in tokenize(text[:at]):
        pos += len(tok)
        if not is_marker(tok) and not tok.isspace():
            start = pos
    return min(start, at)


def _after_header(core: str, turn: str, within_prompt: bool) -> str | None:
    """The turn after the longest token-aligned tail of ``core`` (trailing whitespace aside) that
    it writes as whole tokens, with the whitespace ``core`` ends with taken off its start when it
    starts with it. When it writes none: the whole turn if ``core`` ends every prompt
    (``within_prompt``: the history writes the header, the prompt adds text after it), else None
    (the prompt opens a turn the history does not: the message is written inside another one)."""
    stripped = core.rstrip()
    ws = core[len(stripped):]
    bounds, pos = {0}, 0
    for tok in tokenize(turn):
        pos += len(tok)
        bounds.add(pos)
    at = 0
    for tok in tokenize(stripped):
        tail = stripped[at:]
        if len(tail.strip()) >= MIN_HEADER_TAIL:
            i = turn.find(tail)
            while i >= 0 and not (i in bounds and i + len(tail) in bounds):
                i = turn.find(tail, i + 1)
            if i >= 0:
                rest = turn[i + len(tail):]
                return rest[len(ws):] if ws and rest.startswith(ws) else rest
        at += len(tok)
    if not within_prompt:
        return None
    return turn[len(ws):] if ws and turn.startswith(ws) else turn


def _unwritten_markers(start: str, end: str, written: str) -> list[str]:
    """The reasoning markers the template does not write (``written``: its source and prompt),
    each as its marker-shaped pieces; one of the two may be missing when it pairs with the other
    (a template that cuts past answers at ``</think>`` writes no ``<think>``)."""
    def own(marker: str) -> bool:
        return all(piece in written for piece in (markers_in(marker) or [marker]))
    missing = [m for m in (start, end) if m and not own(m)]
    if len(missing) == 1 and start and end and pairs(start, end):
        return []
    return missing


def with_reasoning(analysis: TemplateAnalysis, generated: str, mode: ReasoningMode) -> str | None:
    """``generated`` with :data:`REASONING` written the way the analysis reads reasoning, for a
    template that drops a message's reasoning from every turn it renders: inside the block the
    prompt opened (``mode`` forced open), inside the empty block the turn writes, or in a block of
    the analysis' own markers before the turn. None when the setting reads no reasoning, the
    analysis has no end marker, the turn's own block holds something, or there is no start marker
    to open a block with.

    Example::

        >>> from chat_autoparser.analyzer import analyze_template
        >>> a = analyze_template("templates/chatml-think.jinja")
        >>> with_reasoning(a, "Hi<|im_end|>\\n", ReasoningMode.OPTIONAL)
        '<think>\\nFirst, think it through.\\n</think>\\nHi<|im_end|>\\n'
    """
    cs = analysis.content_structure
    start, end = cs.reasoning_start, cs.reasoning_end
    if mode not in (ReasoningMode.OPTIONAL, ReasoningMode.FORCED_OPEN) or not end.strip():
        return None
    body = generated.lstrip()
    if mode == ReasoningMode.FORCED_OPEN:
        return REASONING + (generated if body.startswith(end.strip()) else end + generated)
    if start.strip() and body.startswith(start.strip()) and end.strip() in body:  # an empty block of its own
        i = generated.index(start.strip()) + len(start.strip())
        j = generated.index(end.strip(), i)
        return None if generated[i:j].strip() else generated[:i] + "\n" + REASONING + "\n" + generated[j:]
    if not start.strip():
        return None
    return start + REASONING + end + generated


def _settings_for(analysis: TemplateAnalysis, wants_reasoning: bool) -> list[tuple[bool, dict[str, Any]]]:
    """(enable_thinking, template kwargs) to try: thinking on first when the message reasons,
    off first when it does not (a forced-open prompt is not continued by a plain answer)."""
    order = (True, False) if wants_reasoning else (False, True)
    out = []
    for enable in order:
        s = thinking_setting(analysis, enable)
        out.append((enable, s.kwargs_dict if s is not None else {}))
    return out


def _expected_calls(message: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    out = []
    for c in message.get("tool_calls") or []:
        args = c["function"]["arguments"]
        out.append((c["function"]["name"], json.loads(args) if isinstance(args, str) else args, c.get("id")))
    return out


def _norm(text: str | None) -> str:
    return (text or "").strip()


def fixed_point(template: LoadedTemplate, analysis: TemplateAnalysis, scenario: str,
                prober: Prober | None = None) -> FixedPoint:
    """Run one scenario; see the module docstring."""

    caps, ts = analysis.caps, analysis.tool_call_structure
    # whether the scenario applies is the template's to say, not the analysis' (applicability.py)
    facts = source_facts(template, analysis.engine)
    uses_tools = "tool" in scenario or "arguments" in scenario
    instructed = uses_tools and not facts.renders_calls
    if instructed and not facts.renders_tools:
        return FixedPoint(scenario, True, skipped=NO_TOOLS)
    if scenario == "parallel_tool_calls" and facts.renders_calls and not facts.renders_parallel:
        return FixedPoint(scenario, True, skipped="template writes one call per turn")
    wants_reasoning = "reasoning" in scenario
    if wants_reasoning and not facts.writes_reasoning:
        return FixedPoint(scenario, True, skipped=NO_REASONING)
    if wants_reasoning and facts.closes_reasoning:
        return FixedPoint(scenario, True, skipped=CLOSED_REASONING)
    prober = prober or Prober(template, engine=analysis.engine)
    prober.content_format = caps.content_format
    for name in caps.stand_in_variables:  # custom variables the template cannot render without
        prober.default_kwargs.setdefault(name, "")
    forms = tool_forms(caps)
    message = _scenario_message(scenario, forms, caps.requires_nonnull_content)
    names_in_ids = uses_tools and not any(p.kind == "name" for p in ts.call_parts)
    if names_in_ids:  # the template writes ids only: a call's name travels inside its id
        for i, call in enumerate(message.get("tool_calls") or []):
            call["id"] = f"{call['function']['name']}:{i}"
    tools = RT_TOOLS if (uses_tools or caps.requires_tools) else None
    written = message
    if instructed:  # the call the instructions spell, written as the turn's text
        written = instructed_message(prober, message)
        if written is None:
            return FixedPoint(scenario, True, skipped="template renders the tools but no tool calls, and its "
                                                        "instructions spell no call syntax the reader finds")
    cut, enable, via = None, True, "render" if not instructed else "instructions"
    settings = _settings_for(analysis, wants_reasoning)
    for enable, kwargs in settings:
        cut = generated_text(prober, written, tools, kwargs)
        if cut is not None:
            break
    for enable, kwargs in settings if cut is None else ():  # the history leaves out a block the prompt writes
        renders = turn_renders(prober, written, tools, kwargs)
        spliced = None
        if renders is not None:
            plain = prober.render(f"roundtrip:prompt-bare{repr(sorted(kwargs.items()))}", [P.user(QUESTION)],
                                  tools=tools, **kwargs)
            ends = None if plain is None else (renders[0][common_prefix_len(plain, renders[0], tokens=True):], plain)
            spliced = spliced_text(analysis, *renders, wants_reasoning, _opens_reasoning(renders[0]), ends)
        if spliced is not None:
            cut, via = (renders[0], spliced), "splice" if not instructed else "instructions+splice"
            break
    if cut is None:
        why = next((f for k, f in prober.failures.items() if k.startswith("roundtrip:")), None)
        reason = (f"template refuses the conversation: {why.error}" if why else
                  "the rendered turn does not continue the generation prompt under any thinking setting, "
                  "and cannot be spliced onto it (the turn is empty, is written inside another turn or a "
                  "restated conversation, or writes a reasoning block of its own after other text or inside the "
                  "block the prompt closes)")
        return FixedPoint(scenario, True, skipped=reason)
    prompt, generated = cut
    params = generate_parser(analysis, tools=tools, enable_thinking=enable)
    drops: list[str] = []
    problems: list[str] = []
    if wants_reasoning and REASONING not in prompt + generated:  # the template drops it: write it by the markers
        cs, mode = analysis.content_structure, params.parser.mode
        reasoned = with_reasoning(analysis, generated, mode)
        if mode not in (ReasoningMode.OPTIONAL, ReasoningMode.FORCED_OPEN) or not cs.reasoning_end.strip():
            problems.append(f"the template writes reasoning, and the parser for thinking on reads none "
                            f"({mode.value}, end marker {cs.reasoning_end!r})")
        elif reasoned is None:
            problems.append(f"the template drops the message's reasoning, and the analysis' markers "
                            f"({cs.reasoning_start!r}, {cs.reasoning_end!r}) cannot write it into the turn")
        elif unwritten := _unwritten_markers(cs.reasoning_start.strip(), cs.reasoning_end.strip(),
                                             "\n".join(template.variants.values()) + prompt):
            problems.append(f"the analysis' reasoning markers {unwritten!r} are not in the template")
        else:
            generated, via = reasoned, via + "+markers"
    parsed = params.parser.parse(generated)
    # reasoning
    if wants_reasoning:
        rendered_reasoning = REASONING in generated or REASONING in prompt
        if not rendered_reasoning:
            drops.append("reasoning")
        elif _norm(parsed.get("reasoning_content")) != REASONING:
            problems.append(f"reasoning {parsed.get('reasoning_content')!r} != {REASONING!r}")
    elif parsed.get("reasoning_content") and params.parser.mode != ReasoningMode.FORCED_OPEN and \
            _norm(parsed.get("reasoning_content")) != (message.get("content") or ""):
        problems.append(f"unexpected reasoning {parsed.get('reasoning_content')!r}")
    # content
    want_content = message.get("content") or None
    if want_content:
        if want_content not in generated:
            drops.append("content")
        elif not parsed.get("content") and _norm(parsed.get("reasoning_content")) == want_content and \
                not wants_reasoning:
            drops.append("content (the template writes it as reasoning)")
        elif _norm(parsed.get("content")) != want_content:
            problems.append(f"content {parsed.get('content')!r} != {want_content!r}")
    elif parsed.get("content") and _norm(parsed.get("content")):
        problems.append(f"unexpected content {parsed.get('content')!r}")
    # tool calls (a template that writes no calls beside content drops them)
    expected = _expected_calls(message)
    if expected and not any(name in generated or (cid and cid in generated) for name, _, cid in expected):
        drops.append("tool calls")
        expected = []
    got = parsed.get("tool_calls") or []
    if len(got) != len(expected):
        problems.append(f"{len(got)} tool calls parsed, {len(expected)} expected")
    for (name, args, cid), call in zip(expected, got):
        fn = call["function"]
        if fn["name"] != name:
            problems.append(f"call name {fn['name']!r} != {name!r}")
        try:
            got_args = json.loads(fn["arguments"])
        except ValueError:
            problems.append(f"arguments not JSON: {fn['arguments']!r}")
            continue
        if got_args != args:
            problems.append(f"arguments {got_args!r} != {args!r}")
        if cid and cid in generated:
            if call.get("id") != cid:
                problems.append(f"id {call.get('id')!r} != {cid!r}")
        elif cid:
            drops.append("call ids") if "call ids" not in drops else None
    if "parse_error" in parsed:
        problems.append(f"parse error: {parsed['parse_error']['message']}")
    rebuilt = _render_parsed(prober, parsed, forms, tools, kwargs_for(analysis, enable)) if via == "render" else None
    reconstructs, diff = None, ""
    if rebuilt is not None:
        reconstructs = rebuilt == prompt + generated
        if not reconstructs:
            diff = aligned_diff(prompt + generated, rebuilt)
    return FixedPoint(scenario, not problems, template_drops=tuple(drops), problems=tuple(problems),
                      generated=generated, parsed=parsed, reconstructs=reconstructs, reconstruct_diff=diff,
                      enable_thinking=enable, with_tools=tools is not None, prompt=prompt, via=via)


def instructed_message(prober: Prober, message: dict[str, Any]) -> dict[str, Any] | None:
    """For a template that renders the tools but no tool calls: ``message`` with its calls
    written as its text in the syntax the template's instructions spell, as the instructions'
    reader (run on what passing the tools adds to the prompt) reads them, so the template renders
    the turn a model following them writes. None when the reader finds no syntax.

    The analysis of such a template reads its syntax with the same reader, so this checks that
    the parser reads back what the instructions are read to say, not the reading itself."""
    its = read_instructions(tools_section(prober, RT_TOOLS, QUESTION))
    if its is None:
        return None
    calls = [{"name": n, "arguments": a} for n, a, _ in _expected_calls(message)]
    content = message.get("content") or ""
    extra = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")}
    return P.assistant(content + ("\n" if content else "") + format_tool_calls(its, calls), **extra)


def kwargs_for(analysis: TemplateAnalysis, enable_thinking: bool) -> dict[str, Any]:
    s = thinking_setting(analysis, enable_thinking)
    return s.kwargs_dict if s is not None else {}


def _render_parsed(prober: Prober, parsed: dict[str, Any], forms: ToolProbeForms, tools: Any,
                   kwargs: dict[str, Any]) -> str | None:
    """The conversation rendered with the parsed message as the assistant's turn, in the
    message form the template takes (object or string arguments, "" for no content)."""
    calls = []
    for c in parsed.get("tool_calls") or []:
        args: Any = c["function"]["arguments"]
        try:
            args = json.loads(args)
        except ValueError:
            pass
        calls.append((c["function"]["name"], args, c.get("id")))
    extra = {"reasoning_content": parsed["reasoning_content"]} if parsed.get("reasoning_content") else {}
    if calls:
        message = tool_call_messages(forms, calls, content=parsed.get("content"), **extra)
    else:
        message = P.assistant(parsed.get("content") or "", **extra)
    base = [P.user(QUESTION)]
    key = repr(sorted(kwargs.items()))
    return prober.render(f"roundtrip:reparsed{key}:{json.dumps(parsed, sort_keys=True)}", base + [message],
                         tools=tools, **kwargs)


def aligned_diff(want: str, got: str, context: int = 40) -> str:
    """Where two renders part: the common prefix's tail, then each side's continuation."""
    i = common_prefix_len(want, got)
    return (f"at {i}: ...{want[max(0, i - context):i]!r}\n"
            f"  raw output:     {want[i:i + context]!r}\n"
            f"  parsed message: {got[i:i + context]!r}")
