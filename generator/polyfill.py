"""Capability polyfills (seed 003): rewrite a conversation so a template that lacks a feature can
render it, only where the analysis' caps say the feature is missing, and say what was done.

=========================== ======================================================================
the template lacks          the conversation is rewritten so
=========================== ======================================================================
``supports_tools``          the tools are described in the system message (one JSON line each;
                            with the call syntax the analysis learned, when it learned one)
``supports_system_role``    the system message is merged into the first user message
``supports_tool_responses`` each tool result becomes a user message naming the call it answers
=========================== ======================================================================

Example::

    >>> from chat_autoparser.analyzer.structures import Caps
    >>> p = polyfill(Caps(supports_system_role=False), [{"role": "system", "content": "Be brief."},
    ...                                                 {"role": "user", "content": "Hi"}])
    >>> p.messages, p.applied
    ([{'role': 'user', 'content': 'Be brief.\\n\\nHi'}], ('system merged into the first user message',))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.structures import Caps

TOOLS_HEADER = "You can call these tools (one JSON description a line):"
SYNTAX_HEADER = "Write a call like this:"


@dataclass(frozen=True)
class Polyfilled:
    """The conversation to render, the tools to pass (None once described in text), and what
    was rewritten (empty when the template renders everything itself)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    applied: tuple[str, ...] = ()


def _text(content: Any) -> str:
    """A message's content as text (parts joined)."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def describe_tools(tools: Sequence[Mapping[str, Any]], example_call: str = "") -> str:
    """The text the tools polyfill puts in the system message."""
    lines = [TOOLS_HEADER] + [json.dumps(t.get("function", t), ensure_ascii=False) for t in tools]
    if example_call:
        lines += [SYNTAX_HEADER, example_call]
    return "\n".join(lines)


def _with_tools_described(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = _text(first.get("content")) + "\n\n" + text
        return [first] + messages[1:]
    return [{"role": "system", "content": text}] + messages


def _system_merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    rest = [m for m in messages if m.get("role") != "system"]
    for i, m in enumerate(rest):
        if m.get("role") == "user":
            rest[i] = {**m, "content": system + "\n\n" + _text(m.get("content"))}
            return rest
    return [{"role": "user", "content": system}] + rest


def _tool_results_as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            if c.get("id"):
                names[c["id"]] = (c.get("function") or c).get("name", "")
        if m.get("role") == "tool":
            ref = m.get("name") or names.get(m.get("tool_call_id", ""), "") or m.get("tool_call_id", "")
            head = f"Result of the tool call {ref}:" if ref else "Tool result:"
            out.append({"role": "user", "content": f"{head}\n{_text(m.get('content'))}"})
        else:
            out.append(m)
    return out


def polyfill(caps: Caps, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
             *, example_call: str = "") -> Polyfilled:
    """``messages`` and ``tools`` rewritten where ``caps`` say the template lacks a feature
    (see the module docstring); ``example_call`` is a call in the template's syntax, for the
    tools' description."""
    msgs = [dict(m) for m in messages]
    applied: list[str] = []
    out_tools = [dict(t) for t in tools] if tools is not None else None
    if tools and not caps.supports_tools:
        msgs = _with_tools_described(msgs, describe_tools(tools, example_call))
        out_tools = None
        applied.append("tools described in the system message")
    if not caps.supports_tool_responses and any(m.get("role") == "tool" for m in msgs):
        msgs = _tool_results_as_user(msgs)
        applied.append("tool results written as user messages")
    if not caps.supports_system_role and any(m.get("role") == "system" for m in msgs):
        msgs = _system_merged(msgs)
        applied.append("system merged into the first user message")
    return Polyfilled(msgs, out_tools, tuple(applied))
