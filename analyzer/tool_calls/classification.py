"""The skeleton classified into the design's enums and fields (``FUNC_JSON_OBJECT`` with its
field names, ``FUNC_TAG_WITH_NAME`` with prefix/suffix/close, ...)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from ..markers import is_marker, tokenize
from ..structures import ArgumentFormat, FunctionFormat, ToolCallStructure


# --------------------------------------------------------------------------- classification

_JSON_FIELD = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*"?$')
# The name is the value of an attribute in a header, unquoted after a space (`` key=`` or
# `` key=namespace.``), outside any tag: a recipient among the header's attributes (channel
# formats; ``<invoke name=f>`` is a tag's attribute).
_HEADER_ATTRIBUTE = re.compile(r"\s[A-Za-z_][A-Za-z0-9_]*=(?:[A-Za-z_][A-Za-z0-9_]*\.)?$")


def _classify(ts: ToolCallStructure, generation_prompt: str = "") -> ToolCallStructure:
    parts = list(ts.call_parts)
    kinds = [p.kind for p in parts]
    name_i = kinds.index("name") if "name" in kinds else -1
    args_i = kinds.index("args") if "args" in kinds else -1
    lit = lambda i: parts[i].text if 0 <= i < len(parts) and parts[i].kind == "lit" else ""  # noqa: E731
    before_name, after_name = lit(name_i - 1), lit(name_i + 1)
    after_args = lit(args_i + 1)
    fields: dict[str, Any] = {}
    if ts.args_mode == "tagged":
        ap = [p for p in ts.arg_parts]
        a0 = ap[0].text if ap and ap[0].kind == "lit" else ""
        a1 = next((p.text for p in ap[2:3] if p.kind == "lit"), "")
        a2 = ap[-1].text if ap and ap[-1].kind == "lit" else ""
        tags = [t for t in tokenize(a0 + a1 + a2) if is_marker(t)]
        fields.update(arg_prefix=a0, arg_suffix=a1, arg_close=a2)
        fmt = (ArgumentFormat.KEY_VALUE_TAGS if len(tags) >= 3 and a0.strip().endswith(">")
               else ArgumentFormat.TAGGED)
        fields["argument_format"] = fmt
    else:
        fields["argument_format"] = ArgumentFormat.JSON
    pythonic = (ts.args_mode == "tagged" and after_name.endswith("(") and after_args.startswith(")")
                and ts.arg_parts and ts.arg_parts[0].kind == "key")
    recipient = (name_i == 0 and ts.call_separator.strip() and generation_prompt.rstrip().endswith(
        ts.call_separator.strip()))
    m_name = _JSON_FIELD.search(before_name)
    m_args = _JSON_FIELD.search(after_name)
    id_i = kinds.index("id") if "id" in kinds else -1
    if pythonic:
        fields.update(function_format=FunctionFormat.PYTHONIC, function_prefix=before_name,
                      function_suffix=after_name, function_close=after_args)
    elif recipient:
        # the prompt writes the recipient delimiter; calls are separated by it (>>>name\n{...})
        fields.update(function_format=FunctionFormat.RECIPIENT_BASED, function_prefix=ts.call_separator,
                      function_suffix=after_name)
    elif m_name and m_args and ts.args_mode == "whole":
        fields.update(function_format=FunctionFormat.JSON_OBJECT, name_field=m_name.group(1),
                      args_field=m_args.group(1))
        if id_i >= 0:
            m_id = _JSON_FIELD.search(lit(id_i - 1))
            fields["id_field"] = m_id.group(1) if m_id else ""
        else:
            m_id = re.search(r'"([A-Za-z_]*id)"\s*:\s*"?$', "".join(p.text for p in parts if p.kind == "lit"))
            fields["id_field"] = ""
    elif before_name.endswith('{"') and after_name.startswith('":'):
        fields["function_format"] = FunctionFormat.NAME_AS_KEY
    elif "index" in kinds and before_name and not before_name[-1:].isspace() and before_name.rstrip()[-1:] in ".":
        ns = re.search(r"([A-Za-z_][A-Za-z0-9_]*\.)$", before_name)
        fields.update(function_format=FunctionFormat.PREFIXED_INDEXED,
                      function_namespace=ns.group(1) if ns else "",
                      per_call_start=before_name[:len(before_name) - len(ns.group(1))] if ns else before_name,
                      args_marker=lit(args_i - 1), per_call_end=after_args)
    elif re.search(r"\[[A-Z_]+\]$", before_name.strip()) and re.match(r"\[[A-Z_]+\]", after_name.strip() or "x"):
        fields.update(function_format=FunctionFormat.BRACKET_TAG, function_prefix=before_name,
                      function_suffix=after_name)
        if id_i >= 0:
            fields["id_marker"] = lit(id_i - 1)
    elif "```" in "".join(p.text for p in parts if p.kind == "lit"):
        m = re.search(r"```([a-z]*)", "".join(p.text for p in parts if p.kind == "lit"))
        fields.update(function_format=FunctionFormat.MARKDOWN_CODE_BLOCK, code_block_language=m.group(1) if m else "",
                      code_block_marker=ts.tool_section_start.strip())
    elif _HEADER_ATTRIBUTE.search(before_name) and before_name.rfind("<") <= before_name.rfind(">"):
        fields.update(function_format=FunctionFormat.CHANNEL_BASED, function_prefix=before_name,
                      function_suffix=after_name, function_close=after_args)
    elif before_name.endswith("<") and after_name.startswith(">") and "</" in after_args:
        fields.update(function_format=FunctionFormat.TAG_NAME_ONLY, function_prefix=before_name,
                      function_suffix=after_name, function_close=after_args)
    else:
        fields.update(function_format=FunctionFormat.TAG_WITH_NAME, function_prefix=before_name,
                      function_suffix=after_name, function_close=after_args)
    if "per_call_start" not in fields:
        fields["per_call_start"] = lit(0) if name_i > 0 else ""
        fields["per_call_end"] = lit(len(parts) - 1) if parts and parts[-1].kind == "lit" else ""
    if ts.args_mode == "whole":
        fields["args_marker"] = fields.get("args_marker") or lit(args_i - 1)
    return replace(ts, **fields)
