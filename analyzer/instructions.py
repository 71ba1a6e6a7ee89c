"""Tool-call syntax read from a template's instructions, for templates that describe it in the
tools section of the prompt but never render an assistant tool call themselves.

Two shapes are read, both by marker shape and JSON shape, not by model:

* a tool-ish opening marker, a JSON-like example object with quoted field names, and the
  matching closing marker: ``<tool_call>{"name": <function-name>, "arguments": ...}</tool_call>``;
* a tool-ish marker followed by a phrase naming a JSON list: ``respond with <|tool_call|>
  followed by a JSON list of tools used`` (field names are then the common ``name``/``arguments``,
  and the result says they were assumed).

The result is a structure with ``source="instructions"``: it cannot be verified against a
rendering, and says so.

Example::

    >>> ts = read_instructions('Call tools like <tool_call>{"name": <fn>, "arguments": <args>}</tool_call>.')
    >>> ts.tool_section_start, ts.name_field, ts.args_field
    ('<tool_call>', 'name', 'arguments')
"""

from __future__ import annotations

import re

from .markers import is_closing, is_marker, is_opening, pairs, tokenize
from .structures import ArgumentFormat, FunctionFormat, Part, ToolCallStructure, ValueFormat

TOOL_WORDS = ("tool", "call", "function", "action")
_KEY = re.compile(r"""["']([A-Za-z_][A-Za-z0-9_]*)["']\s*:""")
_LIST_PHRASE = re.compile(r"^\s*(?:followed by|with|containing)?\s*(?:a|an)?\s*JSON\s+(?:list|array)", re.I)
NAME_FIELDS = ("name", "function", "tool_name", "function_name")
ARGS_FIELDS = ("arguments", "parameters", "args", "input", "params")


def _tool_ish(marker: str) -> bool:
    low = marker.lower()
    return any(w in low for w in TOOL_WORDS)


def _json_call(start: str, end: str, name_field: str, args_field: str, array: bool, note: str,
               args_first: bool = False) -> ToolCallStructure:
    if args_first:  # keep the example's key order
        call = (Part("lit", f'{{"{args_field}": '), Part("args"), Part("lit", f', "{name_field}": "'), Part("name"),
                Part("lit", '"}'))
    else:
        call = (Part("lit", f'{{"{name_field}": "'), Part("name"), Part("lit", f'", "{args_field}": '),
                Part("args"), Part("lit", "}"))
    return ToolCallStructure(
        supports_tools=True, source="instructions", function_format=FunctionFormat.JSON_OBJECT,
        argument_format=ArgumentFormat.JSON, name_field=name_field, args_field=args_field,
        tool_section_start=start + ("[" if array else ""), tool_section_end=("]" if array else "") + end,
        call_separator=", " if array else end + start, call_parts=call, args_mode="whole",
        args_format=ValueFormat(), supports_parallel=True,
        reason=note, unverified=(("all", "the template never renders an assistant tool call; "
                                          "the syntax was read from its instructions"),))


def read_instructions(text: str) -> ToolCallStructure | None:
    """The call syntax stated in ``text`` (a rendered tools section), or None."""
    toks = tokenize(text)
    for i, t in enumerate(toks):
        if not (is_marker(t) and is_opening(t) and _tool_ish(t)):
            continue
        # (a) opener, example object, closer
        for j in range(i + 1, min(len(toks), i + 120)):
            if is_closing(toks[j]) and pairs(t, toks[j]):
                inner = "".join(toks[i + 1:j])
                keys = _KEY.findall(inner)
                name = next((k for k in keys if k in NAME_FIELDS), None)
                args = next((k for k in keys if k in ARGS_FIELDS), None)
                if name and args and "{" in inner:
                    lead = inner[:len(inner) - len(inner.lstrip())]
                    trail = inner[len(inner.rstrip()):]
                    return _json_call(t + lead, trail + toks[j], name, args, inner.strip().startswith("["),
                                      "tool calls are not rendered by the template; syntax read from its "
                                      "instructions (example between markers)",
                                      args_first=keys.index(args) < keys.index(name))
                break
        # (b) opener "followed by a JSON list"
        rest = "".join(toks[i + 1:i + 40])
        if _LIST_PHRASE.match(rest):
            return _json_call(t, "", "name", "arguments", True,
                              "tool calls are not rendered by the template; syntax read from its instructions "
                              "(marker followed by a JSON list; field names name/arguments assumed)")
    return None
