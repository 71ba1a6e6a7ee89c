"""The fixed roundtrip scenarios: the conversation data and, per scenario, the agent steps it runs
under each template setting (or why it does not apply to a template).

Which settings a scenario runs under comes from the analysis and from probing the template: the
setting in which the model reasons, and the template's own switches that keep or drop past
reasoning (found by rendering, never by their names).

Example::

    >>> from chat_autoparser.generator.prefix.conversation import Conversation, template_of
    >>> conv = Conversation(*template_of("templates/chatml-think.jinja"), TOOLS)
    >>> [s.kwargs for s in plans(conv, "tool_call_reasoning")]
    [{}]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from chat_autoparser.analyzer.structures import ReasoningMode, ThinkingSetting

from ..prefix.conversation import Conversation, tool_message
from ..state import start_state, thinking_setting

SCENARIOS = ("tool_call_reasoning", "multi_param_tool_call", "parallel_tool_calls", "reasoning_dropped",
             "reasoning_preserved", "arguments_string", "arguments_dict", "content_whitespace",
             "non_string_arguments", "truncated_reasoning", "multi_turn_tools")

# --------------------------------------------------------------------------- the conversation data

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a location.",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_flights", "description": "Search flights.",
        "parameters": {"type": "object", "properties": {
            "destination": {"type": "string", "description": "Where to"},
            "passengers": {"type": "integer", "description": "How many travel"},
            "nonstop": {"type": "boolean", "description": "Direct flights only"},
            "max_price": {"type": "number", "description": "Highest fare"},
            "cabin": {"type": ["string", "null"], "description": "Cabin class, or null for any"}},
            "required": ["destination"]}}},
]
USER = "What is the weather in Beijing?"
USER_NEXT = "Thanks. And tomorrow?"
# ends in punctuation: a truncated output's last token can merge with what a template writes next
REASONING = "The user wants the weather in Beijing, so I will call get_weather."
CONTENT = "Let me check."
ANSWER = "It is sunny and 21 degrees in Beijing."
RESULTS = ('{"temperature": 21, "condition": "sunny"}', '{"temperature": 19, "condition": "cloudy"}',
           '{"temperature": 25, "condition": "clear"}')

ONE = ("get_weather", {"location": "Beijing"})
MULTI = ("get_weather", {"location": "Beijing", "unit": "celsius"})
TWO = (("get_weather", {"location": "Beijing"}), ("get_weather", {"location": "Shanghai"}))
NON_STRING = ("search_flights", {"destination": "Tokyo", "passengers": 2, "nonstop": True, "max_price": 450.5,
                                 "cabin": None})
ROUNDS = (("get_weather", {"location": "Beijing"}), ("get_weather", {"location": "Shanghai"}),
          ("get_weather", {"location": "Tokyo", "unit": "fahrenheit"}))


@dataclass(frozen=True)
class Step:
    """One request and the model's answer to it."""

    before: list[dict[str, Any]]   # the conversation the prompt renders
    message: dict[str, Any]        # what the model means to say (reasoning, content, calls)
    after: list[dict[str, Any]]    # what the client appends after the answer
    kwargs: dict[str, Any]
    enable_thinking: bool | None
    args_form: str | None = None   # "string" | "dict" | None (the form the template takes)
    truncate: bool = False         # the output stops inside the reasoning (max_tokens)
    extra_newline: bool = False    # a newline after the reasoning end (before calls or content)


def _calls(calls: Iterable[tuple[str, dict[str, Any]]], conv: Conversation) -> list[dict[str, Any]]:
    return [{"id": conv.call_id(name, i), "type": "function", "function": {"name": name, "arguments": dict(args)}}
            for i, (name, args) in enumerate(calls)]


def assistant(conv: Conversation, reasoning: bool, calls: Sequence[tuple[str, dict[str, Any]]] = (),
               content: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = REASONING
    if calls:
        msg["tool_calls"] = _calls(calls, conv)
    return msg


# --------------------------------------------------------------------------- scenarios

def _thinking_on(conv: Conversation) -> tuple[ThinkingSetting | None, bool]:
    """The setting that lets the model reason (with tools when the scenario uses them), and
    whether it does."""
    s = thinking_setting(conv.analysis, True)
    mode = s.mode_for(conv.tools is not None) if s else conv.analysis.content_structure.reasoning_mode
    return s, mode in (ReasoningMode.FORCED_OPEN, ReasoningMode.OPTIONAL)


def default_setting(conv: Conversation) -> tuple[dict[str, Any], bool | None, bool]:
    """(kwargs, enable_thinking, the model reasons) under the template's default setting."""
    s = thinking_setting(conv.analysis, None)
    mode = s.mode_for(conv.tools is not None) if s else conv.analysis.content_structure.reasoning_mode
    return (s.kwargs_dict if s else {}), None, mode == ReasoningMode.FORCED_OPEN


def _retention_switches(conv: Conversation, base: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Settings, found by probing (not by name), that change whether a past answer's reasoning
    is kept: (those that keep it where ``base`` drops it, those that drop it where ``base``
    keeps it). The probe is a plain answer followed by a new user message, without tools (some
    templates keep all reasoning while tools are present, whatever the switch says)."""
    def keeps(kw: dict[str, Any]) -> bool | None:
        out = conv.render([{"role": "user", "content": USER}, conv.shape(ANSWER, REASONING, ()),
                           {"role": "user", "content": USER_NEXT}], kw, generation_prompt=True, with_tools=False)
        return None if out is None else REASONING in out

    kept = keeps(base)
    keep: list[dict[str, Any]] = []
    drop: list[dict[str, Any]] = []
    for s in conv.analysis.thinking_settings:
        kw = {**base, **s.kwargs_dict}
        if not s.kwargs or kw == base or kw in keep + drop:
            continue
        prompt = conv.render([{"role": "user", "content": USER}], kw, generation_prompt=True, with_tools=False)
        if prompt is None or start_state(conv.analysis, prompt=prompt).mode in (ReasoningMode.NONE,
                                                                                ReasoningMode.DISABLED):
            continue  # a switch that turns thinking off is not about past reasoning
        now = keeps(kw)
        if now is True and kept is False:
            keep.append(kw)
        elif now is False and kept is True:
            drop.append(kw)
    return keep, drop


def plans(conv: Conversation, scenario: str) -> list[Step] | str:
    """The steps of a scenario (one per setting it runs under), or why it does not apply."""
    a = conv.analysis
    ts = a.tool_call_structure
    calls_ok = conv.tools is not None and ts.supports_tools and ts.source == "rendered"
    user = [{"role": "user", "content": USER}]
    on, reasons = _thinking_on(conv)
    on_kw = on.kwargs_dict if on else {}
    d_kw, d_enable, d_reason = default_setting(conv)
    needs_calls = scenario not in ("reasoning_dropped", "reasoning_preserved", "truncated_reasoning",
                                   "content_whitespace")
    if needs_calls and not calls_ok:
        return "the template does not render assistant tool calls"
    if scenario in ("reasoning_dropped", "reasoning_preserved", "truncated_reasoning", "tool_call_reasoning") \
            and not reasons:
        return "the template has no setting in which the model reasons"
    if scenario == "tool_call_reasoning":
        return [Step(user, assistant(conv, True, [ONE]), [tool_message(0, RESULTS[0])], on_kw, True)]
    if scenario in ("multi_param_tool_call", "non_string_arguments", "arguments_string", "arguments_dict"):
        call = {"multi_param_tool_call": MULTI, "non_string_arguments": NON_STRING}.get(scenario, MULTI)
        form = {"arguments_string": "string", "arguments_dict": "dict"}.get(scenario)
        return [Step(user, assistant(conv, d_reason, [call]), [tool_message(0, RESULTS[0])], d_kw,
                     d_enable, args_form=form)]
    if scenario == "parallel_tool_calls":
        if not ts.supports_parallel:
            return "the template writes one call per turn"
        return [Step(user, assistant(conv, d_reason, TWO), [tool_message(0, RESULTS[0]),
                                                             tool_message(1, RESULTS[1])], d_kw, d_enable)]
    if scenario in ("reasoning_dropped", "reasoning_preserved"):
        # reasoning in an earlier turn: the answer (a call where the template renders calls), then a new
        # user message after its result
        if calls_ok:
            msg, after = assistant(conv, True, [ONE]), [tool_message(0, RESULTS[0])]
        else:
            msg, after = assistant(conv, True, content=ANSWER), []
        after = after + [{"role": "user", "content": USER_NEXT}]
        keep, drop = _retention_switches(conv, on_kw)
        if scenario == "reasoning_dropped":  # the defaults, and any switch that drops past reasoning
            return [Step(user, msg, after, kw, True) for kw in [on_kw] + drop]
        if not keep:
            return ("the template keeps past reasoning without a switch" if drop else
                    "the template has no setting that changes whether past reasoning is kept")
        return [Step(user, msg, after, kw, True) for kw in keep]
    if scenario == "truncated_reasoning":
        # the next turn keeps past reasoning where a switch allows it: what is left to see is how the
        # template closes the reasoning the model left open
        keep, _ = _retention_switches(conv, on_kw)
        return [Step(user, assistant(conv, True, content=ANSWER), [{"role": "user", "content": USER_NEXT}],
                     keep[0] if keep else on_kw, True, truncate=True)]
    if scenario == "content_whitespace":
        if not reasons:
            return "the template has no reasoning end to write whitespace after"
        if calls_ok:
            return [Step(user, assistant(conv, True, [ONE]), [tool_message(0, RESULTS[0])], on_kw, True,
                         extra_newline=True)]
        return [Step(user, assistant(conv, True, content=ANSWER), [{"role": "user", "content": USER_NEXT}],
                     on_kw, True, extra_newline=True)]
    return []  # multi_turn_tools: its rounds are built by _multi_turn
