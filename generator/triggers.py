"""Lazy-grammar triggers and preserved tokens.

A lazy grammar stays off until a trigger appears in the output, so free text costs nothing.
The trigger is the tool section's start marker; without one, the first literal of a call;
when a call starts with no fixed word (a raw JSON object such as ``{"name": "get_weather", ...``),
a regex *pattern* over that start and the tool names — where the reference implementation
leaves such formats without a grammar.

Laziness is off when the prompt forces reasoning open (a trigger inside the reasoning would
switch the grammar on too early), and when no trigger can be found.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> grammar_triggers(a, [{"type": "function", "function": {"name": "f"}}])
    [{'type': 'word', 'value': '<tool_call>'}]
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.markers import is_marker, tokenize
from chat_autoparser.analyzer.structures import ReasoningMode, TemplateAnalysis


def _names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [t.get("function", t)["name"] for t in tools]


def grammar_triggers(analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``[{"type": "word"|"pattern", "value": ...}]`` that start the grammar.

    Patterns group with ``(?:...)`` only: llama.cpp starts the grammar at a pattern's first
    capturing group when it has one (see :func:`trigger_start`). A marker of another call form
    the template writes (``ToolCallStructure.alt_openers``) followed by a call's start triggers
    too, the grammar starting at the call (the marker is not part of the grammar's form)."""
    own = _own_triggers(analysis, tools)
    alts = analysis.tool_call_structure.alt_openers
    return own + [{"type": "pattern", "value": re.escape(m) + r"\s*(" + _regex(t) + ")"} for m in alts for t in own]


def _regex(trigger: Mapping[str, str]) -> str:
    return re.escape(trigger["value"]) if trigger["type"] == "word" else trigger["value"]


def _own_triggers(analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The triggers of the template's own call form."""
    ts = analysis.tool_call_structure
    start = ts.tool_section_start.strip()
    if start:
        return [{"type": "word", "value": start}]
    first = ts.call_parts[0] if ts.call_parts else None
    if first is not None and first.kind == "lit":
        lead = first.text.strip()
        toks = tokenize(lead)
        if toks and is_marker(toks[0]):  # a marker opens every call
            ends = {t for x in (analysis.end_of_turn, analysis.final_suffix) for t in tokenize(x) if is_marker(t)}
            if toks[0] not in ends:
                return [{"type": "word", "value": toks[0]}]
            # the marker also ends every turn: the trigger runs on to the call's next marker
            nxt = next((i for i in range(1, len(toks)) if is_marker(toks[i])), None)
            return [{"type": "word", "value": "".join(toks[:nxt + 1]) if nxt is not None else lead}]
        if lead:
            # no fixed word: the call's own opening text followed by a tool name
            second = ts.call_parts[1] if len(ts.call_parts) > 1 else None
            names = "|".join(re.escape(n) for n in _names(tools))
            if second is not None and second.kind == "name" and names:
                head = r"\s*".join(re.escape(x) for x in lead.split())
                return [{"type": "pattern", "value": f"{head}(?:{names})"}]
            return [{"type": "word", "value": lead}]
    if first is not None and first.kind == "name" and _names(tools):
        # calls start with the bare name (recipient-based, pythonic lists without brackets)
        return [{"type": "pattern", "value": "(?:" + "|".join(re.escape(n) for n in _names(tools)) + ")"}]
    return []


def use_lazy_grammar(analysis: TemplateAnalysis, mode: ReasoningMode, tool_choice: str,
                     triggers: list[dict[str, str]]) -> bool:
    """Lazy unless calls are required, reasoning is forced open, or nothing can trigger it."""
    if tool_choice == "required" or mode == ReasoningMode.FORCED_OPEN:
        return False
    return bool(triggers)


def preserved_tokens(analysis: TemplateAnalysis) -> list[str]:
    """Every marker the format uses (tokenizers must keep them whole)."""
    cs, ts = analysis.content_structure, analysis.tool_call_structure
    texts = [cs.reasoning_start, cs.reasoning_end, cs.content_start, cs.content_end, analysis.end_of_turn,
             ts.tool_section_start, ts.tool_section_end, ts.call_separator, ts.arg_separator,
             *(p.text for p in ts.call_parts if p.kind == "lit"),
             *(p.text for p in ts.arg_parts if p.kind == "lit"),
             *(t for p in ts.arg_parts if p.kind == "typed" for _, t in p.by_type)]
    out: list[str] = []
    for text in texts:
        for tok in tokenize(text or ""):
            if is_marker(tok) and tok not in out:
                out.append(tok)
    return out


def trigger_start(text: str, triggers: Sequence[dict[str, str]]) -> int | None:
    """Where a lazy grammar starts in ``text``, as llama.cpp decides: at the leftmost match of
    any word or pattern trigger, or at a ``pattern_full`` trigger that matches the whole text;
    the grammar sees the text from the match's first non-empty capturing group on, else from
    the match's start. None when nothing triggers.

    Example::

        >>> trigger_start("Sure. <tool_call>{...}", [{"type": "word", "value": "<tool_call>"}])
        6
    """
    def start(m: re.Match[str]) -> int:
        return next((m.start(i) for i in range(1, m.re.groups + 1) if m.group(i)), m.start())

    for t in triggers:
        if t["type"] == "pattern_full" and (m := re.fullmatch(t["value"], text)):
            return start(m)
    found = [m for t in triggers if t["type"] in ("word", "pattern")
             if (m := re.search(re.escape(t["value"]) if t["type"] == "word" else t["value"], text))]
    return start(min(found, key=lambda m: m.start())) if found else None
