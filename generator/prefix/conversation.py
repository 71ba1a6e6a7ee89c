"""A conversation rendered through one template: messages shaped the way the template reads them,
the model's output written in the template's own format, and the message a client builds back.

Shared by the roundtrip check (:mod:`chat_autoparser.generator.verify.roundtrip`) and the bridge
(:mod:`chat_autoparser.generator.prefix.bridge`). Everything derives from the analysis: where the template
reads reasoning (``caps.reasoning_field``), whether it takes arguments as text or as an object,
its markers and its call skeleton (written by :mod:`chat_autoparser.analyzer.formatter`).

Example::

    >>> from chat_autoparser.analyzer import analyze_template, load_template
    >>> t = load_template("templates/chatml-think.jinja")
    >>> conv = Conversation(t, analyze_template(t))
    >>> stop_marker(conv.analysis)
    '<|im_end|>'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from chat_autoparser.analyzer import analyze_template, load_template
from chat_autoparser.analyzer.caps import tool_forms
from chat_autoparser.analyzer.formatter import format_tool_calls
from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.markers import markers_in
from chat_autoparser.analyzer.prober import Prober
from chat_autoparser.analyzer.probes import with_reasoning
from chat_autoparser.analyzer.structures import (
    ContentMode,
    ReasoningMode,
    TemplateAnalysis,
)

from chat_autoparser.errors import ConversationError

from ..state import start_state

Message = dict[str, Any]


def template_of(source: Any, analysis: TemplateAnalysis | None = None) -> tuple[LoadedTemplate, TemplateAnalysis]:
    """The loaded template and its analysis, from a path, a loaded template or an analysis whose
    ``template`` names a readable file."""
    if isinstance(source, TemplateAnalysis):
        analysis = analysis or source
        if not Path(source.template).is_file():
            raise ConversationError(f"the analysis names {source.template!r}, which is not a readable template "
                                    "file; pass the template (a path or a loaded template) and analysis=")
        source = source.template
    if isinstance(source, (str, Path)):
        source = load_template(source)
    if not isinstance(source, LoadedTemplate):
        raise ConversationError(f"expected a template path, a LoadedTemplate or a TemplateAnalysis, not "
                                f"{type(source).__name__}")
    return source, analysis or analyze_template(source, engine="jinja2")


def stop_marker(analysis: TemplateAnalysis) -> str:
    """The marker a model ends its turn with: the first marker of what the template writes after
    the last message (``final_suffix``), else of the end of turn ("" when there is none)."""
    for text in (analysis.final_suffix, analysis.end_of_turn):
        found = markers_in(text)
        if found:
            return found[0]
    return (analysis.final_suffix or analysis.end_of_turn).strip()


def turn_markers(analysis: TemplateAnalysis, rendered: str = "") -> list[str]:
    """The markers that frame a turn: the model's stop marker, those of the generation prompt, and
    those in ``rendered`` (a conversation the template rendered) written with the same delimiters
    (``<|`` and ``|>``, say). A vocabulary fits a template when each of these is one special token."""
    found = [stop_marker(analysis)] + markers_in(analysis.generation_prompt)
    found = [m for m in found if m]
    shapes = {(m[:2], m[-2:]) for m in found if len(m) > 4}
    found += [m for m in markers_in(rendered) if (m[:2], m[-2:]) in shapes]
    return [m for i, m in enumerate(found) if m not in found[:i]]


@dataclass
class Conversation:
    """Renders conversations through one template, remembering why a render failed."""

    template: LoadedTemplate
    analysis: TemplateAnalysis
    tool_list: Sequence[dict[str, Any]] | None = None
    extra_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        caps = self.analysis.caps
        self.prober = Prober(self.template, engine=self.analysis.engine)
        self.prober.content_format = caps.content_format
        self.prober.default_kwargs = {v: "" for v in caps.stand_in_variables}
        self.tools = list(self.tool_list) if self.tool_list and (caps.supports_tools or caps.requires_tools) \
            else None
        self._n = 0
        self._last = ""

    # ----------------------------------------------------------------- rendering
    def render(self, messages: Sequence[Message], kwargs: dict[str, Any], *, generation_prompt: bool,
               with_tools: bool = True) -> str | None:
        """The render (None when it fails: :meth:`why` says why); ``with_tools=False`` leaves the tools
        out unless the template cannot render without them."""
        self._n += 1
        self._last = f"roundtrip#{self._n}"
        tools = self.tools if with_tools or self.analysis.caps.requires_tools else None
        return self.prober.render(self._last, list(messages), tools=tools,
                                  add_generation_prompt=generation_prompt, **{**kwargs, **self.extra_kwargs})

    def why(self, default: str) -> str:
        failure = self.prober.failures.get(self._last)
        return f"{default}: {failure.error}" if failure else default

    # ----------------------------------------------------------------- messages
    def call_id(self, name: str, index: int) -> str:
        """The id the model writes for a call (a format that names calls only in their ids gets the
        name in it); nine alphanumerics otherwise, which every template accepts."""
        parts = self.analysis.tool_call_structure.call_parts
        if parts and not any(p.kind == "name" for p in parts):
            return f"{name}:{index}"
        return f"rtcall{index:03d}"

    def shape(self, content: str | None, reasoning: str | None, calls: Sequence[tuple[str | None, str, Any]],
              args_form: str | None = None) -> Message:
        """An assistant message as the template reads it: reasoning in its field, arguments as JSON
        text (``args_form="string"``), as an object (``"dict"``) or as the template needs (None)."""
        caps = self.analysis.caps
        as_string = tool_forms(caps).args_as_string if args_form is None else args_form == "string"
        msg: Message = {"role": "assistant", "content": content}
        if calls:
            msg["tool_calls"] = [{**({"id": cid} if cid else {}), "type": "function",
                                  "function": {"name": name, "arguments": _args(args, as_string)}}
                                 for cid, name, args in calls]
        if content is None and (caps.requires_nonnull_content or not calls):
            msg["content"] = ""  # an answer with no calls has text, if empty (as OpenAI returns it)
        if reasoning:
            msg = with_reasoning(msg, caps.reasoning_field or "reasoning_content", reasoning)
        return msg

    def as_template_message(self, message: Message) -> Message:
        calls = [(c.get("id"), c["function"]["name"], c["function"]["arguments"])
                 for c in message.get("tool_calls") or []]
        return self.shape(message.get("content"), message.get("reasoning_content"), calls)

    # ----------------------------------------------------------------- the model's output
    def model_output(self, before: Sequence[Message], message: Message, kwargs: dict[str, Any], prompt: str,
                     enable_thinking: bool | None) -> tuple[str, str] | None:
        """What the model generates after ``prompt`` to say ``message``, up to its stop marker, and
        where that came from: the template's own rendering of the turn when it continues the prompt
        and shows every part, else the analysis (markers, content wrapper, the formatter's calls)."""
        full = self.render(list(before) + [self.as_template_message(message)], kwargs, generation_prompt=False)
        if full is not None and full.startswith(prompt):
            out = full[len(prompt):].rstrip()  # what follows the stop marker is the template's, not the model's
            if _shows(out, message):
                return out, "the template's rendering of the turn"
        composed = self.compose(message, prompt, enable_thinking)
        return None if composed is None else (composed, "the analysis' markers and the formatter")

    def compose(self, message: Message, prompt: str, enable_thinking: bool | None) -> str | None:
        a = self.analysis
        cs, ts = a.content_structure, a.tool_call_structure
        mode = start_state(a, prompt=prompt, enable_thinking=enable_thinking, with_tools=self.tools is not None).mode
        out = ""
        reasoning = message.get("reasoning_content")
        if reasoning:
            if mode == ReasoningMode.FORCED_OPEN:
                out += reasoning + cs.reasoning_end
            elif mode == ReasoningMode.OPTIONAL and cs.reasoning_start:
                out += cs.reasoning_start + reasoning + cs.reasoning_end
            else:
                return None
        elif mode == ReasoningMode.FORCED_OPEN:
            out += cs.reasoning_end
        content = message.get("content")
        if content:
            wrapped = cs.content_mode == ContentMode.ALWAYS_WRAPPED or (
                cs.content_mode == ContentMode.WRAPPED_WITH_REASONING and reasoning)
            out += cs.content_start + content + cs.content_end if wrapped else content
        calls = message.get("tool_calls")
        if calls:
            out += (ts.content_separator if content else "") + format_tool_calls(ts, calls)
        stop = stop_marker(a)
        return out if not stop or out.endswith(stop) else out + stop

    def after_reasoning_end(self, output: str, reasoning: str) -> int | None:
        """Where the text after the reasoning's end marker (and the whitespace it writes) starts."""
        i = output.find(reasoning)
        end = self.analysis.content_structure.reasoning_end
        core = end.strip()
        if i < 0 or not core:
            return None
        j = i + len(reasoning)
        if output.startswith(end, j):
            return j + len(end)
        k = output.find(core, j)
        if k < 0:
            return None
        k += len(core)
        trailing = end[end.find(core) + len(core):]
        return k + len(trailing) if output.startswith(trailing, k) else k


def _args(args: Any, as_string: bool) -> Any:
    if as_string:
        return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _shows(out: str, message: Message) -> bool:
    """The rendered turn shows every part of the message (its reasoning, content and calls)."""
    for text in (message.get("reasoning_content"), message.get("content")):
        if text and text not in out:
            return False
    return all(c["function"]["name"] in out or (c.get("id") or "\0") in out for c in message.get("tool_calls") or [])


def client_message(conv: Conversation, parsed: Message, args_form: str | None) -> Message:
    """The assistant message an OpenAI client sends back: the parsed fields, arguments as the JSON
    text the server returned (``"string"``), parsed into an object (``"dict"``), or in the form the
    template takes (None)."""
    calls = [(c.get("id"), c["function"]["name"], c["function"]["arguments"]) for c in parsed.get("tool_calls") or []]
    return conv.shape(parsed.get("content"), parsed.get("reasoning_content"), calls, args_form)


def tool_message(index: int, content: str) -> Message:
    """A tool result answering the ``index``-th call of the answer before it (:func:`answer_calls`
    fills in that call's id and name once the answer is parsed)."""
    return {"role": "tool", "content": content, CALL_INDEX: index}


CALL_INDEX = "_answers_call"


def answer_calls(messages: Sequence[Message], calls: Sequence[Message]) -> list[Message]:
    """Tool results made by :func:`tool_message`, pointed at the parsed ``calls`` (OpenAI style:
    ``tool_call_id`` and ``name``)."""
    out = []
    for m in messages:
        if CALL_INDEX in m:
            call = calls[m[CALL_INDEX]] if m[CALL_INDEX] < len(calls) else {}
            m = {k: v for k, v in m.items() if k != CALL_INDEX}
            m["name"] = (call.get("function") or {}).get("name", "")
            if call.get("id"):
                m["tool_call_id"] = call["id"]
        out.append(m)
    return out
