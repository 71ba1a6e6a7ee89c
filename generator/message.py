"""The grammar of a whole assistant message: reasoning, content, tool sections and the end of
the turn, from the analysis and the request (reasoning mode, tools on or off, parallel calls).

Example::

    >>> from analyzer import analyze_template
    >>> from analyzer.structures import ReasoningMode
    >>> from generator.peg import run_all
    >>> g = build_message_grammar(analyze_template("templates/chatml-think.jinja"),
    ...                           mode=ReasoningMode.OPTIONAL, tools_enabled=False, parallel=False)
    >>> [e for e in run_all(g, "<think>\\nhm\\n</think>\\nHi")[1] if e[0] == "chunk"]
    [('chunk', 'reasoning', 'hm'), ('chunk', 'content', 'Hi')]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from analyzer.markers import is_marker, tokenize
from analyzer.structures import FunctionFormat, ReasoningMode, TemplateAnalysis

from .calls import (bare_json_calls, channel_call, channel_parts, section_end, separator_ws, skeleton_call,
                    tool_guards, tool_section, tool_stops, turn_end_like)
from .peg import Ahead, Attempt, Capture, Choice, Empty, Lit, Marker, Opt, Parser, Repeat, Seq, Until, Ws
from .recovery import AtEnd, Segments


@dataclass(frozen=True)
class GrammarPlan:
    """What the message grammar was built from (kept for reports and the GBNF emitter)."""

    reasoning_mode: ReasoningMode
    reasoning_start: str
    reasoning_end: str
    content_start: str
    content_end: str
    end_of_turn: str
    tools: bool
    parallel: bool


def turn_stop_markers(analysis: TemplateAnalysis) -> set[str]:
    """The markers a model stops at: the last token of the end of turn and of the final suffix,
    when it is a marker (``<|END_OF_TURN_TOKEN|>`` of ``<|END_RESPONSE|><|END_OF_TURN_TOKEN|>``;
    none for ``<|close|>message``, whose ``<|close|>`` closes other blocks too)."""
    out = set()
    for text in (analysis.end_of_turn, analysis.final_suffix):
        toks = tokenize(text.strip())
        if toks and is_marker(toks[-1]):
            out.add(toks[-1])
    return out


def split_turn_end(analysis: TemplateAnalysis) -> tuple[TemplateAnalysis, str]:
    r"""(the analysis with its tool section end cut before an end-of-turn marker the end holds,
    the cut-off rest).

    Some templates close the section and the turn in one piece (``\n]\n</tool_call></s>\n``).
    The model stops at that marker, which is often its end-of-sequence token: a server strips it
    from the output, and a grammar cannot match it. So it belongs to the turn, and only the
    part before it closes the section. Example::

        >>> from dataclasses import replace
        >>> from analyzer import analyze_template
        >>> a = analyze_template("templates/chatml-think.jinja")
        >>> ts = replace(a.tool_call_structure, tool_section_end="]</tool_call><|im_end|>\n")
        >>> cut, rest = split_turn_end(replace(a, tool_call_structure=ts))
        >>> cut.tool_call_structure.tool_section_end, rest
        (']</tool_call>', '<|im_end|>\n')
    """
    ts = analysis.tool_call_structure
    stops = turn_stop_markers(analysis)
    toks = tokenize(ts.tool_section_end)
    cut = next((i for i, t in enumerate(toks) if t in stops), None)
    if cut is None:
        return analysis, ""
    end = "".join(toks[:cut])
    ts = replace(ts, tool_section_end=end if end.strip() else "")
    return replace(analysis, tool_call_structure=ts), "".join(toks[cut:])


def known_calls(names: frozenset[str] | None):
    """An :class:`Attempt` predicate: every call its events hold names one of ``names`` (any
    name when the request gave no tools)."""
    def accept(events: list[tuple]) -> bool:
        seen = [e[1] for e in events if e[0] == "call"]
        seen += [_name_after(events, i) for i, e in enumerate(events) if e == ("open", "tool_name")]
        return bool(seen) and (names is None or all(n.strip() in names for n in seen))
    return accept


def _name_after(events: list[tuple], i: int) -> str:
    """The name a ``tool_name`` region opened at ``i`` holds."""
    out = []
    for e in events[i + 1:]:
        if e[0] == "close":
            break
        if e[0] == "chunk":
            out.append(e[2])
    return "".join(out)


def build_message_grammar(analysis: TemplateAnalysis, *, mode: ReasoningMode, tools_enabled: bool,
                          parallel: bool, tool_names: frozenset[str] | None = None) -> Parser:
    analysis, turn_end = split_turn_end(analysis)
    cs = analysis.content_structure
    ts = analysis.tool_call_structure
    alts: list[tuple[tuple[str, ...], Parser]] = []
    stops: list[Marker] = []
    end_m = Marker.of(cs.reasoning_end) if cs.reasoning_end.strip() else None
    # reasoning runs to its end marker, or to the end of the turn when the model never closes it
    turn_ends = [Marker.stop(x) for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
    reasoning_body = Capture("reasoning", Until(([end_m] if end_m else []) +
                                                [m for m in turn_ends if not end_m or m.core != end_m.core]))
    after_reasoning: Parser = Opt(end_m, tuple(g for g in end_m.first() if g)) if end_m else Empty()
    if cs.reasoning_start.strip() and end_m is not None and mode != ReasoningMode.NONE:
        start_m = Marker.of(cs.reasoning_start)
        guards = tuple(g for g in start_m.first() if g)
        alts.append((guards, Seq(start_m, reasoning_body, after_reasoning)))
        stops.append(start_m)
    if end_m is not None and end_m.core != cs.reasoning_start.strip():
        # a lone end marker: the empty block some templates write (``</think>`` alone), or a
        # stray close after an answer without reasoning; a control marker, not text
        alts.append(((end_m.core,), end_m))
        stops.append(Marker(end_m.core))
    if cs.content_start.strip():
        cstart = Marker.of(cs.content_start)
        cend = Marker.of(cs.content_end) if cs.content_end.strip() else None
        ends = [x for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
        inner_stops = ([cend] if cend else []) + tool_stops(ts, tools_enabled) + \
            [Marker.stop(x) for x in ends]
        body = Capture("content", Until(inner_stops))
        seq = [cstart, body] + ([Opt(cend, tuple(g for g in cend.first() if g))] if cend else [])
        alts.append((tuple(g for g in cstart.first() if g), Seq(*seq)))
        stops.append(cstart)
    if tools_enabled and ts.supports_tools and ts.call_parts:
        guards = tool_guards(ts)
        if guards:
            sep = separator_ws(ts)
            section = tool_section(ts, parallel)
            if sep:  # the separator before the calls is theirs, not the content's
                guards = tuple(dict.fromkeys(x for g in guards for x in Marker(g, sep).first()))
                section = Seq(Marker("", sep), section)
            alts.append((guards, section))
            stops += [Marker(g, separator_ws(ts)) for g in guards if g.strip() == g]
        channel = channel_parts(ts)
        if channel is not None:  # the same call with its header attributes in another order
            alts.append(((channel[1],), channel_call(ts, channel)))
            stops.append(Marker(channel[1]))
    ends = [analysis.end_of_turn] + ([turn_end] if tools_enabled and turn_end else [])
    if tools_enabled and ts.supports_tools and turn_end_like(ts):
        ends.append(section_end(ts))  # ends a tool-call turn; may follow content written after calls
    final = analysis.final_suffix
    end_markers: dict[str, Marker] = {}
    for end in ends + ([final] if final.strip() else []):
        if end.strip():
            m = Marker.of(end)
            prev = end_markers.get(m.core)
            if prev is not None:  # the same marker: it takes the whitespace either writes around it
                m = Marker(m.core, max(prev.before, m.before, key=len), max(prev.after, m.after, key=len))
            end_markers[m.core] = m
    for core, eot_m in end_markers.items():
        if not any(Marker.of(e).core == core for e in ends if e.strip()):  # the final suffix alone
            if core in [m.core for m in stops]:
                continue
            # only at the very end: text the template writes after the last message (an EOS token)
            alts.append((eot_m.first(), Seq(eot_m, AtEnd())))
        else:
            alts.append((eot_m.first(), eot_m))  # the stop token, if the server left it in: dropped
        stops.append(Marker(eot_m.core, eot_m.before))
    if tools_enabled and ts.function_format == FunctionFormat.RECIPIENT_BASED and ts.call_separator.strip():
        return _recipient_grammar(analysis, stops)
    blank_end = analysis.end_of_turn if analysis.end_of_turn and not analysis.end_of_turn.strip() else ""
    body = Segments(alts, stops, tail=blank_end)
    if tools_enabled and ts.supports_tools and bare_json_calls(ts):
        # calls with no marker before them: only where the format puts them (the whole output, or
        # its end after content when the template writes content first), and only when they are
        # calls to the request's tools; else the text is content
        bare = Attempt(Seq(Ws(), tool_section(ts, parallel), Ws(), Ahead([m.core for m in end_markers.values()])),
                       accept=known_calls(tool_names))
        if ts.calls_after_content:
            alts.append((("{", "["), bare))
            stops += [Marker("{"), Marker("[")]
        body = Seq(bare, Segments(alts, stops, tail=blank_end))
    if mode == ReasoningMode.FORCED_OPEN and end_m is not None:
        return Seq(reasoning_body, after_reasoning, body)
    if analysis.message_prefix:  # whitespace the template writes first: the turn's, not content
        return Seq(Marker("", analysis.message_prefix), body)
    return body


def _recipient_grammar(analysis: TemplateAnalysis, stops: list[Marker]) -> Parser:
    """Recipient-based turns (``>>>all\n...``, ``>>>get_weather\n{...}``): every message is
    addressed; the content's recipient is the content opener the analysis found, any other
    recipient is a function. The prompt writes the first delimiter."""
    ts, cs = analysis.tool_call_structure, analysis.content_structure
    delim = Marker.of(ts.call_separator)
    ends = [Marker.stop(x) for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
    text_stops = [Marker(delim.core)] + ends
    content = Seq(Lit(cs.content_start), Capture("content", Until(text_stops))) if cs.content_start else None
    call = skeleton_call(ts)
    item = Choice([((cs.content_start,), content)], call) if content is not None else call
    eot = Opt(ends[0]) if ends else Empty()
    return Seq(Repeat(item, delim, min=1, closers=tuple(m.core for m in ends)), eot)
