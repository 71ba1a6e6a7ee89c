"""What the exporters share: a call cut at its arguments, read through the one skeleton walk
(:mod:`chat_autoparser.analyzer.walk`), and the request's tool names.

A call is ``before`` (the parts up to its arguments: literals, the name, an id, an index),
the arguments slot, and ``after`` (what closes it). Formats that take a call as "an opener, a
body, a closer" (HF response templates, structural tags) read it this way; each writes the
parts its own way with a :class:`~chat_autoparser.analyzer.walk.SkeletonVisitor`.

Example::

    >>> from chat_autoparser.analyzer.structures import Part, ToolCallStructure
    >>> ts = ToolCallStructure(call_parts=(Part("lit", "<f="), Part("name"), Part("lit", ">"), Part("args"),
    ...                                    Part("lit", "</f>")), args_mode="whole",
    ...                        supports_tools=True)
    >>> f = call_frame(ts, "hf", "t")
    >>> [p.kind for p in f.before], [p.text for p in f.after]
    (['lit', 'name', 'lit'], ['</f>'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.structures import FunctionFormat, Part, ToolCallStructure
from chat_autoparser.analyzer.walk import PartKind, split_at

from ...errors import NotExpressible


@dataclass(frozen=True)
class CallFrame:
    """A call cut at its arguments (see the module docstring)."""

    before: tuple[Part, ...]
    args: Part
    after: tuple[Part, ...]

    @property
    def closer(self) -> str:
        """The literal text after the arguments."""
        return "".join(p.text for p in self.after)


def call_frame(ts: ToolCallStructure, fmt: str, template: str) -> CallFrame:
    """The call of ``ts`` as opener, arguments and closer; NotExpressible when the arguments are
    not one slot followed by literals only."""
    if not ts.supports_tools or not ts.call_parts:
        raise NotExpressible(f"the template writes no tool calls ({ts.reason or 'none rendered'})",
                             template=template, fmt=fmt)
    if ts.function_format == FunctionFormat.PYTHONIC:
        raise NotExpressible("calls are Python call syntax (name(key=value, ...)): Python literals are no "
                             "JSON", template=template, fmt=fmt)
    before, args, after = split_at(ts.call_parts, PartKind.ARGS)
    if args is None:
        raise NotExpressible("the call has no arguments slot", template=template, fmt=fmt)
    slot = next((p for p in after if p.kind != PartKind.LIT.value), None)
    if slot is not None:
        raise NotExpressible(f"the call writes its {slot.kind} after its arguments: the arguments do not end "
                             "where a closing literal begins", template=template, fmt=fmt)
    return CallFrame(before, args, after)


def tool_names(tools: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The function names of OpenAI-style tools (or of bare ``{"name": ...}`` functions)."""
    return [t.get("function", t)["name"] for t in tools or ()]


def tool_parameters(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's parameter schema (an object schema when it gives none)."""
    fn = tool.get("function", tool)
    schema = dict(fn.get("parameters") or {})
    schema.setdefault("type", "object")
    return schema
