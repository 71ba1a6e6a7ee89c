"""Probe conversations and needles, as data.

Needles are distinctive strings placed in messages so that renders can be searched and
diffed. Function names, argument names, values and call ids are *varied* across renders
(``_a``/``_b`` variants) so that no probe value can pass for a marker.
"""

from __future__ import annotations

import copy
from typing import Any

USER = "Userq7needle"
USER2 = "Userq8needle"
SYSTEM = "Systemq7needle"
CONTENT = "Contentq7needle"
CONTENT2 = "Contentq8needle"
REASONING = "Reasonq7needle"
REASONING2 = "Reasonq8needle"
TOOL_RESULT = "Resultq7needle"

# Function names and call ids: two variants each (Mistral-family templates require ids of
# exactly 9 alphanumerics, so every id is shaped that way).
FN_A = "probe_fn_alpha"
FN_B = "probe_fn_beta"
FN_C = "probe_fn_gamma"
ID_A = "Qx7Ab3Kp9"
ID_B = "Zr4Mn8Wt2"
ID_C = "Hv2Ls6Jc5"

NEEDLES = (USER, USER2, SYSTEM, CONTENT, CONTENT2, REASONING, REASONING2, TOOL_RESULT)

ARG_S = "city_key"
ARG_T = "alpha_key"  # sorts before ARG_S: reveals templates that sort keys
VAL_S = "Parisq7needle"
VAL_T = "Romeq8needle"


def user(text: str = USER) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str = SYSTEM) -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(content: str | None = CONTENT, **extra: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    msg.update(extra)
    return msg


def tool_schema(name: str, props: dict[str, Any] | None = None, required: list[str] | None = None
                ) -> dict[str, Any]:
    props = props if props is not None else {ARG_S: {"type": "string", "description": "A city"}}
    return {"type": "function", "function": {
        "name": name, "description": f"Probe function {name}.",
        "parameters": {"type": "object", "properties": props,
                       "required": required if required is not None else list(props)[:1]}}}


def tool_call(name: str, args: dict[str, Any] | str, call_id: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
    if call_id is not None:
        call["id"] = call_id
    return call


def tool_result(content: str = TOOL_RESULT, call_id: str | None = ID_A, name: str = FN_A
                ) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "tool", "content": content, "name": name}
    if call_id is not None:
        msg["tool_call_id"] = call_id
    return msg


def as_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with string content turned into OpenAI content parts."""
    out = copy.deepcopy(messages)
    for m in out:
        if isinstance(m.get("content"), str):
            m["content"] = [{"type": "text", "text": m["content"]}]
    return out


# Where reasoning can travel in a message, besides the aliased top-level fields. Generic
# message shapes (OpenAI/Anthropic-style blocks), tried in order; data, not model names.
def reasoning_shapes(reasoning: str, content: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("reasoning_content", {"reasoning_content": reasoning, "content": content}),
        ("reasoning", {"reasoning": reasoning, "content": content}),
        ("content_blocks:thinking", {"content": [{"type": "thinking", "thinking": reasoning},
                                                 {"type": "text", "text": content}]}),
        ("content_blocks:thoughts", {"content": {"blocks": [{"type": "thoughts", "text": reasoning},
                                                            {"type": "response", "text": content}]}}),
    ]


# Reasoning-like template variables get probed as thinking controls (their names, not a
# model's, decide): any undeclared variable whose name contains one of these.
THINKING_VARIABLE_WORDS = ("think", "reason", "effort", "cot")
# Never treated as controls (top-level names that are message data, not switches).
NOT_CONTROLS = frozenset({"reasoning_content", "messages", "tools"})
