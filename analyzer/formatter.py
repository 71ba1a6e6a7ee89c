"""Write tool calls through a :class:`~chat_autoparser.analyzer.structures.ToolCallStructure` (structure → text).

This is the first oracle of the design: formatting the probe calls through the inferred
structure must reproduce the template's own rendering byte for byte. The generator reuses
it (e.g. to build grammar literals and examples).

Example::

    >>> from chat_autoparser.analyzer.structures import ToolCallStructure, Part
    >>> ts = ToolCallStructure(call_parts=(Part("lit", "<call>"), Part("name"), Part("lit", " "),
    ...                                    Part("args"), Part("lit", "</call>")), args_mode="whole")
    >>> format_tool_calls(ts, [{"name": "f", "arguments": {"x": 1}}])
    '<call>f {"x": 1}</call>'
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from .structures import Part, ToolCallStructure, ValueFormat
from .values import dump, json_type


def _typed(part: Part, value: Any) -> str:
    table = dict(part.by_type)
    t = json_type(value)
    if t in table:
        return table[t]
    if t in ("integer", "number") and ("number" in table or "integer" in table):
        return table.get("number", table.get("integer", ""))
    return table.get("other", table.get("string", ""))


def value_format_for(ts: ToolCallStructure, value: Any) -> ValueFormat:
    formats = dict(ts.value_formats)
    t = json_type(value)
    if t in formats:
        return formats[t]
    if t in ("integer", "number"):
        return formats.get("number", formats.get("integer", ts.args_format))
    return formats.get("object", ts.args_format)


def _unit(ts: ToolCallStructure, key: str, value: Any, text: str) -> str:
    pieces = []
    for p in ts.arg_parts:
        if p.kind == "lit":
            pieces.append(p.text)
        elif p.kind == "key":
            pieces.append(key)
        elif p.kind == "value":
            pieces.append(text)
        elif p.kind == "typed":
            pieces.append(_typed(p, value))
    return "".join(pieces)


def _units(ts: ToolCallStructure, value: Any, fmt: ValueFormat) -> str:
    """A nested value written as argument units again (objects) or item units (arrays)."""
    if isinstance(value, dict):
        return ts.arg_separator.join(_unit(ts, k, v, _units(ts, v, fmt)) for k, v in value.items()
                                     if v is not None)
    if isinstance(value, list):
        return ts.arg_separator.join(_unit(ts, fmt.item_key, v, _units(ts, v, fmt)) for v in value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return value if isinstance(value, str) else str(value)


def format_value(ts: ToolCallStructure, value: Any) -> str:
    """One argument's value in a tagged unit."""
    fmt = value_format_for(ts, value)
    return _units(ts, value, fmt) if fmt.kind == "units" else dump(value, fmt)


def format_arguments(ts: ToolCallStructure, args: Mapping[str, Any]) -> str:
    """The arguments of one call, as the template writes them."""
    if ts.args_mode != "tagged":
        return ts.args_empty if not args and ts.args_empty is not None else dump(dict(args), ts.args_format)
    items = [(k, v) for k, v in args.items() if not (ts.skip_null_args and v is None)]
    if not items:
        return ts.args_empty or ""
    if ts.args_format.sort_keys:
        items.sort()
    return ts.arg_separator.join(_unit(ts, k, v, format_value(ts, v)) for k, v in items)


def format_call(ts: ToolCallStructure, name: str, args: Mapping[str, Any] | str, call_id: str | None,
                index: int) -> str:
    """One call (without the section markers)."""
    if isinstance(args, str):
        args = json.loads(args)
    out = []
    for p in ts.call_parts:
        if p.kind == "lit":
            out.append(p.text)
        elif p.kind == "name":
            out.append(name)
        elif p.kind == "id":
            out.append(call_id or "")
        elif p.kind == "index":
            out.append(str(index + int(p.text or "0")))
        elif p.kind == "args":
            out.append(format_arguments(ts, args))
        elif p.kind == "typed":
            out.append(_typed(p, args))
    return "".join(out)


def _call_fields(call: Mapping[str, Any]) -> tuple[str, Any, str | None]:
    fn = call.get("function", call)
    return fn["name"], fn.get("arguments", {}), call.get("id")


def format_tool_calls(ts: ToolCallStructure, calls: Iterable[Mapping[str, Any]]) -> str:
    """All calls of one message: section start, calls joined by the separator, section end.

    ``calls`` are OpenAI-style (``{"id", "function": {"name", "arguments"}}``) or plain
    ``{"name", "arguments"}``; arguments may be a dict or JSON text.
    """
    texts = [format_call(ts, *_call_fields(c), index=i) for i, c in enumerate(calls)]
    return ts.tool_section_start + ts.call_separator.join(texts) + ts.tool_section_end
