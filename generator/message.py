"""The grammar of a whole assistant message: reasoning, content, tool sections and the end of
the turn, from the analysis and the request (reasoning mode, tools on or off, parallel calls).

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> from chat_autoparser.analyzer.structures import ReasoningMode
    >>> from chat_autoparser.generator.peg import run_all
    >>> g = build_message_grammar(analyze_template("templates/chatml-think.jinja"),
    ...                           mode=ReasoningMode.OPTIONAL, tools_enabled=False, parallel=False)
    >>> [e for e in run_all(g, "<think>\\nhm\\n</think>\\nHi")[1] if e[0] == "chunk"]
    [('chunk', 'reasoning', 'hm'), ('chunk', 'content', 'Hi')]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chat_autoparser.analyzer.markers import is_marker, tokenize
from chat_autoparser.analyzer.structures import FunctionFormat, ReasoningMode, TemplateAnalysis

from .calls import (Sectioned, bare_json_calls, call_guards, channel_call, channel_parts, section_end, separator_ws,
                    tool_guards, tool_section, tool_stops, turn_end_like)
from .skeleton import skeleton_call
from .peg import (Ahead, Attempt, Capture, Check, Choice, Empty, Lazy, Lit, Marker, Noted, Opt, OptMarker, Parser,
                  Seq, Text, Until, Ws)
from .recovery import FENCE, AtEnd, Segments, TextUntilCall


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
        >>> from chat_autoparser.analyzer import analyze_template
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
        seen = [e[1] for e in events if e[0] == "call"] + [e[3] for e in events if e[0] == "whole_call"]
        seen += [_name_after(events, i) for i, e in enumerate(events) if e == ("open", "tool_name")]
        # formats that write the name inside the call id (``functions.get_weather:0``)
        ids = [_name_after(events, i) for i, e in enumerate(events) if e == ("open", "tool_id")]
        if not seen and ids:
            return names is None or all(any(n in i for n in names) for i in ids)
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


@dataclass(frozen=True)
class Request:
    """What the grammar depends on besides the analysis."""

    mode: ReasoningMode
    tools_enabled: bool
    parallel: bool
    tool_names: frozenset[str] | None = None
    calls_in_reasoning: bool = True  # an unclosed reasoning block ends at a call to a known tool
    open_content: bool = False  # the prompt opened the content wrapper: the output starts inside it


class _Builder:
    """Builds the message grammar part by part: the body is a loop of guarded segments
    (``alts``); text between them stops at ``stops`` and is content."""

    def __init__(self, analysis: TemplateAnalysis, req: Request) -> None:
        self.analysis, self.turn_end = split_turn_end(analysis)
        self.req = req
        self.cs = self.analysis.content_structure
        self.ts = self.analysis.tool_call_structure
        self.tools = req.tools_enabled and self.ts.supports_tools and bool(self.ts.call_parts)
        self.alts: list[tuple[tuple[str, ...], Parser]] = []
        self.text_guards: list[str] = []  # (guards of alternatives that are content: see ``Segments``)
        self.stops: list[Marker] = []
        self.end_m = Marker.of(self.cs.reasoning_end) if self.cs.reasoning_end.strip() else None
        self.inside_content: list[Parser] = []  # a content wrapper's body and closer
        self.start_m = Marker.of(self.cs.reasoning_start) if self.cs.reasoning_start.strip() else None

    def add(self, guards: tuple[str, ...], parser: Parser, *stops: Marker) -> None:
        self.alts.append((guards, parser))
        self.stops += stops

    # ---- reasoning
    def reasoning_body(self) -> Parser:
        """Reasoning runs to its end marker, or to the end of the turn when the model never closes
        it, or (a request with tools) to a well-formed call to one of them when the end marker
        does not follow the call (a call drafted in reasoning that closes later is reasoning)."""
        turn_ends = [Marker.stop(x) for x in (self.analysis.end_of_turn, self.analysis.final_suffix) if x.strip()]
        end_m = self.end_m
        stops = ([end_m] if end_m else []) + [m for m in turn_ends if not end_m or m.core != end_m.core]
        if self.tools and self.req.calls_in_reasoning and self.req.tool_names:
            accept = known_calls(self.req.tool_names)
            probes = [(guards, Check(self.section(with_start), accept=accept))
                      for guards, with_start in ((tool_guards(self.ts), True), (call_guards(self.ts), False)) if guards]
            if probes:
                return TextUntilCall("reasoning", stops, probes, "reasoning was not closed before a tool call",
                                     closer=end_m.core if end_m else "",
                                     fenced=self.ts.function_format != FunctionFormat.MARKDOWN_CODE_BLOCK)
        return Capture("reasoning", Until(stops))

    def after_reasoning(self) -> Parser:
        return Opt(self.end_m, tuple(g for g in self.end_m.first() if g)) if self.end_m else Empty()

    def reasoning(self) -> None:
        if self.start_m is not None and self.end_m is not None and self.req.mode != ReasoningMode.NONE:
            self.add(tuple(g for g in self.start_m.first() if g),
                     Seq(self.start_m, self.reasoning_body(), self.after_reasoning()), self.start_m)
        end_m = self.end_m
        if end_m is not None and end_m.core != self.cs.reasoning_start.strip():
            # a lone end marker: the empty block some templates write (``</think>`` alone), or a
            # stray close after an answer without reasoning; a control marker, not text
            self.add((end_m.core,), end_m, Marker(end_m.core))

    def forced_open(self, body: Parser) -> Parser:
        """The prompt opened reasoning: the output starts inside it (the model may write the
        start marker again)."""
        again = Noted(OptMarker(self.start_m, loose_after=False), "the reasoning start written again") \
            if self.start_m is not None else Empty()
        return Seq(again, self.reasoning_body(), self.after_reasoning(), body)

    # ---- content, tools, ends
    def content(self) -> None:
        cs, analysis = self.cs, self.analysis
        if not cs.content_start.strip():
            return
        cstart = Marker.of(cs.content_start)
        cend = Marker.of(cs.content_end) if cs.content_end.strip() else None
        ends = [x for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
        inner_stops = ([cend] if cend else []) + tool_stops(self.ts, self.req.tools_enabled) + \
            [Marker.stop(x) for x in ends]
        self.inside_content = [Capture("content", Until(inner_stops))] + \
            ([Opt(cend, tuple(g for g in cend.first() if g))] if cend else [])
        self.add(tuple(g for g in cstart.first() if g), Seq(cstart, *self.inside_content), cstart)

    def section(self, with_start: bool = True) -> Parser:
        """The tool section for this request (a call left open also ends with the turn)."""
        ends = [x for x in (self.analysis.end_of_turn, self.analysis.final_suffix) if x.strip()]
        return tool_section(self.ts, self.req.parallel, with_start=with_start, turn_ends=ends,
                            names=self.req.tool_names)

    def tool_calls(self) -> None:
        if not self.tools:
            return
        ts = self.ts
        for guards, with_start in ((tool_guards(ts), True), (call_guards(ts), False)):  # (without the opener)
            if not guards:
                continue
            sep, section = separator_ws(ts, with_start), Sectioned(self.section(with_start))
            if not with_start:
                section = Noted(section, "calls written without the tool section's opener")
            if sep:  # the separator before the calls is theirs, not the content's
                section = Seq(Marker("", sep), section)
                guards = tuple(dict.fromkeys(x for g in guards for x in Marker(g, sep).first()))
            self.add(guards, section, *[Marker(g, sep) for g in guards if g.strip() == g])
        channel = channel_parts(ts)
        if channel is not None:  # the same call with its header attributes in another order
            ends = [t for t in tokenize(self.cs.reasoning_end) if is_marker(t)]  # (a header never runs over them)
            self.add((channel[1],), channel_call(ts, channel, ends), Marker(channel[1]))
        for opener in ts.alt_openers:  # a form the template writes in another branch (<|python_tag|>)
            calls = Seq(Marker(opener).loose(), self.section(), self.alt_markers())
            self.add((opener,), Noted(Attempt(calls, accept=known_calls(self.req.tool_names)),
                                      f"calls opened by {opener!r}, which the template writes in another branch"),
                     Marker(opener).loose(after=False))

    def alt_markers(self) -> Parser:
        """One of the markers of the template's other call forms, after calls (``<|eom_id|>``), or none."""
        alts = self.ts.alt_openers if self.tools else ()
        return Choice([((m,), Marker(m).loose()) for m in alts], Empty()) if alts else Empty()

    def end_markers(self) -> dict[str, Marker]:
        """The markers that end the turn (the end of turn, the final suffix, a section end that
        ends a tool-call turn), each with the most whitespace any of them writes around it."""
        analysis = self.analysis
        ends = self.turn_ends()
        out: dict[str, Marker] = {}
        for end in ends + ([analysis.final_suffix] if analysis.final_suffix.strip() else []):
            if end.strip():
                m = Marker.of(end)
                prev = out.get(m.core)
                if prev is not None:  # the same marker: it takes the whitespace either writes around it
                    m = Marker(m.core, max(prev.before, m.before, key=len), max(prev.after, m.after, key=len))
                out[m.core] = m
        return out

    def turn_ends(self) -> list[str]:
        ends = [self.analysis.end_of_turn] + ([self.turn_end] if self.req.tools_enabled and self.turn_end else [])
        if self.req.tools_enabled and self.ts.supports_tools and turn_end_like(self.ts):
            ends.append(section_end(self.ts))  # ends a tool-call turn; may follow content written after calls
        return ends

    def ends(self) -> None:
        ends = self.turn_ends()
        for core, eot_m in self.end_markers().items():
            if not any(Marker.of(e).core == core for e in ends if e.strip()):  # the final suffix alone
                if core in [m.core for m in self.stops]:
                    continue
                # only at the very end: text the template writes after the last message (an EOS token)
                self.add(eot_m.first(), Seq(eot_m, AtEnd()), Marker(eot_m.core, eot_m.before))
            else:  # the stop token, if the server left it in: dropped
                self.add(eot_m.first(), eot_m, Marker(eot_m.core, eot_m.before))

    def code_fences(self) -> None:
        """A fenced code block in content is content to its closing fence: markers inside it
        open nothing (a model showing the syntax is not calling). The text after the fence goes
        on as content."""
        if not self.tools or self.ts.function_format == FunctionFormat.MARKDOWN_CODE_BLOCK:
            return
        ends = [Marker.stop(x) for x in (self.analysis.end_of_turn, self.analysis.final_suffix) if x.strip()]

        def fenced() -> Parser:
            return Capture("content", Seq(Text(FENCE), Until([Marker(FENCE)] + ends), Opt(Text(FENCE)),
                                          Until(self.stops)))
        self.add((FENCE,), Lazy(fenced), Marker(FENCE))
        self.text_guards.append(FENCE)

    def bare_calls(self) -> Parser | None:
        """Calls with no marker before them: only where the format puts them (the whole output,
        or its end after content when the template writes content first), and only when they
        are calls to the request's tools; else the text is content."""
        ts = self.ts
        if not (self.tools and bare_json_calls(ts)):
            return None
        ends = Ahead([m.core for m in self.end_markers().values()])
        bare = Attempt(Seq(Ws(), self.section(), Ws(), self.alt_markers(), ends),
                       accept=known_calls(self.req.tool_names))
        if ts.calls_after_content:
            self.add(("{", "["), bare, Marker("{"), Marker("["))
        return bare

    def build(self) -> Parser:
        self.reasoning()
        self.content()
        self.tool_calls()
        self.code_fences()
        bare = self.bare_calls()
        self.ends()
        analysis = self.analysis
        if self.req.tools_enabled and self.ts.function_format == FunctionFormat.RECIPIENT_BASED and \
                self.ts.call_separator.strip():
            return _recipient_grammar(analysis, self.stops, self.req.tool_names)
        blank_end = analysis.end_of_turn if analysis.end_of_turn and not analysis.end_of_turn.strip() else ""
        body: Parser = Segments(self.alts, self.stops, tail=blank_end, ends=tuple(self.end_markers()),
                                text_guards=self.text_guards)
        if bare is not None:
            body = Seq(bare, body)
        if self.req.open_content and self.inside_content:
            return Seq(*self.inside_content, body)
        if self.req.mode == ReasoningMode.FORCED_OPEN and self.end_m is not None:
            return self.forced_open(body)
        if analysis.message_prefix:  # whitespace the template writes first: the turn's, not content
            return Seq(Marker("", analysis.message_prefix), body)
        return body


def build_message_grammar(analysis: TemplateAnalysis, *, mode: ReasoningMode, tools_enabled: bool,
                          parallel: bool, tool_names: frozenset[str] | None = None,
                          calls_in_reasoning: bool = True, open_content: bool = False) -> Parser:
    """The parser of a whole message for one request shape."""
    return _Builder(analysis, Request(mode, tools_enabled, parallel, tool_names, calls_in_reasoning,
                                      open_content)).build()


def _recipient_grammar(analysis: TemplateAnalysis, stops: list[Marker], names: frozenset[str] | None) -> Parser:
    """Recipient-based turns (``>>>all\n...``, ``>>>get_weather\n{...}``): every message is
    addressed; the content's recipient is the content opener the analysis found, any other
    recipient is a function. The prompt writes the first delimiter: the first message is found by
    its recipient (the content opener, or the name of a tool of the request). Text no recipient
    opens (unaddressed, after the end of the turn, a header cut short) is content."""
    ts, cs = analysis.tool_call_structure, analysis.content_structure
    delim = Marker.of(ts.call_separator)
    ends = [Marker.stop(x) for x in (analysis.end_of_turn, analysis.final_suffix) if x.strip()]
    text_stops = [Marker(delim.core)] + ends
    content = Seq(Lit(cs.content_start), Capture("content", Until(text_stops))) if cs.content_start else None
    call = skeleton_call(ts, [Marker(delim.core, "", "", True)] + ends)
    item = Choice([((cs.content_start,), content)], call) if content is not None else call
    alts: list[tuple[tuple[str, ...], Parser]] = [((delim.core,), Seq(delim, item))]
    if content is not None:
        alts.append(((cs.content_start,), content))
    if names:
        alts.append((tuple(sorted(names)), call))
    alts += [(m.first(), m) for m in ends]  # the stop token, if the server left it in: dropped
    return Segments(alts, text_stops, ends=tuple(m.core for m in ends))
