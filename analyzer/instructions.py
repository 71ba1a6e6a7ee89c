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

For calls the template does render as a bare JSON object, :func:`instructed_openers` reads the
prefix its instructions glue to the example call (``functools[{"name": ...}, ...]``): models
write it although history never shows it.

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


# Placeholders an instruction writes where a call's name, an argument's name and its value go
# ("function_name", "$TOOL_NAME", "example_parameter_1", "$PARAMETER_VALUE", ...).
_NAME_SLOT = re.compile(r"\$[A-Z_]*(?:TOOL|FUNC)[A-Z_]*NAME\d*|\b[a-z_]*(?:function|tool)[a-z_]*_name\b")
_KEY_SLOT = re.compile(r"\$[A-Z_]*(?:PARAM|ARG)[A-Z_]*NAME\d*|\b[a-z_]*(?:param|arg)[a-z_]*(?:_name|_\d+)\b")
_VALUE_SLOT = re.compile(r"\$[A-Z_]*VALUE\d*|\b[a-z_]*value(?:_\d+)?\b")


def _slot(pattern: re.Pattern[str], text: str, start: int = 0) -> re.Match[str] | None:
    """The first placeholder ``pattern`` finds from ``start`` that is not a tag's own name."""
    for m in pattern.finditer(text, start):
        if text[max(0, m.start() - 2):m.start()][-1:] != "<" and text[max(0, m.start() - 2):m.start()] != "</":
            return m
    return None


def _either(text: str) -> Part:
    """A literal that shows two spellings (``string="true|false"``): the first for strings, the
    second for other values (a typed literal)."""
    m = re.search(r"(\w+)\|(\w+)", text)
    if m is None:
        return Part("lit", text)
    first, second = text[:m.start()] + m.group(1) + text[m.end():], text[:m.start()] + m.group(2) + text[m.end():]
    return Part("typed", by_type=(("string", first), ("other", second)))


def _tag_end(text: str, i: int) -> int:
    """Just past the tag that starts at or after ``i`` (its ``>``)."""
    j = text.find("<", i)
    k = text.find(">", j) if j >= 0 else -1
    return k + 1 if k >= 0 else -1


def read_tagged(opener: str, inner: str, closer: str) -> ToolCallStructure | None:
    r"""A tagged call syntax shown by example between ``opener`` and ``closer`` (placeholders
    where the name, an argument's name and its value go), or None.

    Example::

        >>> ts = read_tagged("<tool_call>", "function_name\n<arg_key>parameter_name</arg_key>\n"
        ...                  "<arg_value>parameter_value</arg_value>\n", "</tool_call>")
        >>> [p.text for p in ts.arg_parts if p.kind == "lit"]
        ['<arg_key>', '</arg_key>\n<arg_value>', '</arg_value>']
    """
    name = _slot(_NAME_SLOT, inner)
    key = _slot(_KEY_SLOT, inner, name.end()) if name else None
    value = _slot(_VALUE_SLOT, inner, key.end()) if key else None
    if value is None:
        return None
    unit_start = inner.rfind("<", name.end(), key.start())
    unit_end = _tag_end(inner, value.end())
    if unit_start < 0 or unit_end < 0:
        return None
    name_tag = inner.rfind("<", 0, name.start())  # the tag the name is written in, if any
    in_tag = name_tag >= 0 and inner.find(">", name_tag) > name.start()
    rest = inner[unit_end:]
    if in_tag:  # <invoke name="$TOOL_NAME"> ... </invoke>: the call is that tag; the block a section
        tag = tokenize(inner[name_tag:])[0]
        close = next((t for t in tokenize(rest) if is_marker(t) and is_closing(t) and pairs(tag, t)), "")
        if not close:
            return None
        tail = rest[:rest.find(close) + len(close)]
        tail = tail[len(tail) - len(close) - (len(tail[:-len(close)]) - len(tail[:-len(close)].rstrip())):]
        several = _NAME_SLOT.search(inner, unit_end) is not None
        call_head = inner[name_tag:name.start()] if several else opener + inner[:name.start()]
        call_tail = tail if several else tail + inner[inner.rfind(close) + len(close):] + closer
        head = opener + inner[:name_tag]
        section = (head[head.rfind(opener):], inner[inner.rfind(close) + len(close):] + closer) if several \
            else ("", "")
    else:  # <tool_call>function_name ... </tool_call>: the block is the call
        call_head = opener + inner[:name.start()]
        call_tail = inner[len(inner.rstrip()):] + closer
        section = ("", "")
    sep = re.match(r"\s*", rest).group(0)
    call = (Part("lit", call_head), Part("name"), Part("lit", inner[name.end():unit_start]), Part("args"),
            Part("lit", call_tail))
    unit = (Part("lit", inner[unit_start:key.start()]), Part("key"), _either(inner[key.end():value.start()]),
            Part("value"), Part("lit", inner[value.end():unit_end]))
    return ToolCallStructure(
        supports_tools=True, source="instructions", function_format=FunctionFormat.TAG_WITH_NAME,
        argument_format=ArgumentFormat.TAGGED, tool_section_start=section[0], tool_section_end=section[1],
        call_parts=call, args_mode="tagged", arg_parts=unit, arg_separator=sep, call_separator="\n",
        value_formats=(("string", ValueFormat(raw_strings=True)),), args_format=ValueFormat(), supports_parallel=True,
        reason="tool calls are not rendered by the template; syntax read from its instructions (tagged example)",
        unverified=(("all", "the syntax was read from the template's instructions"),))


def read_instructions(text: str) -> ToolCallStructure | None:
    """The call syntax stated in ``text`` (a rendered tools section), or None."""
    toks = tokenize(text)
    for i, t in enumerate(toks):
        if not (is_opening(t) and is_marker(t) and _tool_ish(t)):
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
                tagged = read_tagged(t, inner, toks[j])
                if tagged is not None:
                    return tagged
                break
        # (b) opener "followed by a JSON list"
        rest = "".join(toks[i + 1:i + 40])
        if _LIST_PHRASE.match(rest):
            return _json_call(t, "", "name", "arguments", True,
                              "tool calls are not rendered by the template; syntax read from its instructions "
                              "(marker followed by a JSON list; field names name/arguments assumed)")
    return None


# a prefix glued to an example call: a run of non-space characters, then "[" or nothing, then the call
_GLUED = re.compile(r"""([^\s\[\]{}"'`]{3,})\[?\Z""")


def instructed_openers(text: str, call_start: str, tool_names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Prefixes that ``text`` (a rendered tools section) glues to an example of a call written
    as a bare JSON object starting with ``call_start`` (``{"name": "``): the example's opening
    brace and key, with any of the quotes and spacing, directly after the prefix and an optional
    ``[``. An object naming one of ``tool_names`` (the tools passed) is the tools list, not an
    example.

    >>> instructed_openers('formatted as functools[{"name": [function name], ...}]', '{"name": "')
    ('functools',)
    >>> instructed_openers('Respond in the format {"name": function name}', '{"name": "')
    ()
    >>> instructed_openers('<tools>[{"name": "get_weather"}]</tools>', '{"name": "', ("get_weather",))
    ()
    """
    m = _KEY.match(call_start, 1) if call_start.startswith("{") else None
    if m is None:
        return ()
    example = re.compile(r"\{\s*[\"']" + re.escape(m.group(1)) + r"[\"']\s*:")
    found: list[str] = []
    listed = tuple(f'"{n}"' for n in tool_names) + tuple(f"'{n}'" for n in tool_names)
    for e in example.finditer(text):
        if listed and text[e.end():].lstrip().startswith(listed):
            continue
        glued = _GLUED.search(text, max(0, e.start() - 80), e.start())
        if glued is not None and any(c.isalpha() for c in glued.group(1)) and glued.group(1) not in found:
            found.append(glued.group(1))
    return tuple(found)
