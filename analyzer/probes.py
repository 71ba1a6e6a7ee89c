"""Probe conversations and needles, as data.

Needles are distinctive strings placed in messages so that renders can be searched and
diffed. Function names, argument names, values and call ids are *varied* across renders
(``_a``/``_b`` variants) so that no probe value can pass for a marker.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import AnalysisError
from .template_info import BlockKind

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


# Where reasoning can travel in a message: the top-level fields serving APIs use (OpenAI-style
# ``reasoning_content`` / ``reasoning``), or a content block of a kind the template itself
# writes (:func:`block_shape`, read from the template by ``content_block_kinds``).
REASONING_FIELDS = ("reasoning_content", "reasoning")
BLOCKS = "content_blocks:"


def block_shape(reasoning: BlockKind, text: BlockKind | None) -> str:
    """The name of a content-block shape: reasoning in a block of kind ``reasoning``, the answer
    in a block of kind ``text`` after it (same container), or none.

    >>> block_shape(BlockKind("", "thinking", "thinking"), BlockKind("", "text", "text"))
    'content_blocks:thinking.thinking+text.text'
    >>> block_shape(BlockKind("blocks", "thoughts", "text"), None)
    'content_blocks:blocks.thoughts.text'
    """
    name = BLOCKS + ".".join(p for p in (reasoning.container, reasoning.type, reasoning.field) if p)
    return name + (f"+{text.type}.{text.field}" if text is not None else "")


def reasoning_fields(where: str, reasoning: str, content: str | None = None) -> dict[str, Any]:
    """The message fields that carry ``reasoning`` (and ``content``) the way ``where`` names:
    a top-level field, or a content-block shape (:func:`block_shape`).

    >>> reasoning_fields("reasoning_content", "R", "C")
    {'reasoning_content': 'R', 'content': 'C'}
    >>> reasoning_fields("content_blocks:blocks.thoughts.text+response.text", "R", "C")
    {'content': {'blocks': [{'type': 'thoughts', 'text': 'R'}, {'type': 'response', 'text': 'C'}]}}
    """
    if not where.startswith(BLOCKS):
        return {where: reasoning, **({"content": content} if content is not None else {})}
    spec, _, text = where[len(BLOCKS):].partition("+")
    parts, answer = spec.split("."), text.split(".") if text else []
    if len(parts) not in (2, 3) or len(answer) not in (0, 2) or not all(parts + answer):
        raise AnalysisError(f"reasoning field {where!r} names no content-block shape (container.type.key"
                            "+type.key); an analysis written before 0.2 names its shape otherwise: analyse again")
    *container, kind, key = parts
    blocks: list[dict[str, Any]] = [{"type": kind, key: reasoning}]
    if answer:
        blocks.append({"type": answer[0], answer[1]: content or ""})
    return {"content": {container[0]: blocks} if container else blocks}


def with_reasoning(message: dict[str, Any], where: str, reasoning: str) -> dict[str, Any]:
    """``message`` with ``reasoning`` put where ``where`` names; content blocks carry the
    message's content as their answer.

    >>> with_reasoning({"role": "assistant", "content": "C"}, "reasoning", "R")
    {'role': 'assistant', 'content': 'C', 'reasoning': 'R'}
    """
    if where.startswith(BLOCKS):
        return {**message, **reasoning_fields(where, reasoning, message.get("content") or "")}
    return {**message, where: reasoning}


# Reasoning-like template variables get probed as thinking controls: any undeclared variable
# whose name contains one of the serving API's words for it (``enable_thinking``,
# ``reasoning_effort``), and the switches tested only under one (``caps.thinking_controls``).
THINKING_VARIABLE_WORDS = ("think", "reason", "effort")
# Never treated as controls (top-level names that are message data, not switches).
NOT_CONTROLS = frozenset({"reasoning_content", "messages", "tools"})
