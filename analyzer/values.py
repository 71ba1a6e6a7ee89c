"""Write JSON values the way a template does, and learn how a template does it.

Templates write argument values in a few families: JSON (``tojson``, with or without spaces),
Python (``{{ value }}`` on a dict gives ``{'a': True}``), raw strings inside tags, and
JSON-like dialects (``{city:<|"|>Paris<|"|>}``). :func:`dump` writes a value under a
:class:`~chat_autoparser.analyzer.structures.ValueFormat`; :func:`candidates` lists the standard formats;
:func:`dialect_from` builds a dialect from the pieces seen around probe values.

Example::

    >>> dump({"a": [1, True, None]}, ValueFormat())
    '{"a": [1, true, null]}'
    >>> dump({"a": True}, ValueFormat(kind="python_str"))
    "{'a': True}"
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from .structures import ValueFormat

JSON_DEFAULT = ValueFormat()
JSON_COMPACT = ValueFormat(kv_sep=":", item_sep=",")
JSON_ASCII = ValueFormat(ensure_ascii=True)
JSON_ASCII_COMPACT = ValueFormat(ensure_ascii=True, kv_sep=":", item_sep=",")
PYTHON_STR = ValueFormat(kind="python_str")     # str(value): repr inside containers
PYTHON_REPR = ValueFormat(kind="python_repr")   # repr(value), strings quoted too


def json_type(value: Any) -> str:
    """The JSON type name of a Python value: string, integer, number, boolean, null, object, array."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "array"


def _cdata(s: str, fmt: ValueFormat) -> str:
    if fmt.cdata_chars and any(ch in s for ch in fmt.cdata_chars):
        return f"<![CDATA[{s}]]>"
    return s


def _table(s: str, fmt: ValueFormat) -> str:
    table = dict(fmt.escapes)
    return "".join(table.get(ch, ch) for ch in s) if table else s


def _string(s: str, fmt: ValueFormat) -> str:
    if fmt.escape == "table":
        return f"{fmt.str_open}{_cdata(_table(s, fmt), fmt)}{fmt.str_close}"
    if fmt.escape == "json":
        body = json.dumps(s, ensure_ascii=fmt.ensure_ascii)[1:-1]
    elif fmt.escape == "python":
        return repr(s)
    else:
        body = s
    return f"{fmt.str_open}{body}{fmt.str_close}"


def _key(k: str, fmt: ValueFormat) -> str:
    if fmt.escape == "python":
        return repr(k)
    body = json.dumps(k, ensure_ascii=fmt.ensure_ascii)[1:-1] if fmt.escape == "json" else k
    return f"{fmt.key_open}{body}{fmt.key_close}"


def dump(value: Any, fmt: ValueFormat, *, top: bool = True) -> str:
    """Write ``value`` as the template would under ``fmt``."""
    if fmt.indent and fmt.kind == "json":
        text = json.dumps(value, ensure_ascii=fmt.ensure_ascii, indent=fmt.indent, sort_keys=fmt.sort_keys)
        return text.replace("\n", "\n" + " " * fmt.indent_base) if fmt.indent_base else text
    if fmt.kind in ("python_str", "python_repr"):
        if isinstance(value, str) and (fmt.kind == "python_str" or (top and fmt.raw_strings)):
            return value if top else repr(value)
        return str(value) if fmt.kind == "python_str" else repr(value)
    if isinstance(value, str):
        return _cdata(_table(value, fmt), fmt) if (top and fmt.raw_strings) else _string(value, fmt)
    if isinstance(value, bool):
        return fmt.true if value else fmt.false
    if value is None:
        return fmt.null
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        pairs = sorted(value.items()) if fmt.sort_keys else value.items()
        items = fmt.item_sep.join(f"{_key(str(k), fmt)}{fmt.kv_sep}{dump(v, fmt, top=False)}"
                                  for k, v in pairs)
        return f"{fmt.obj_open}{items}{fmt.obj_close}"
    if isinstance(value, (list, tuple)):
        return f"{fmt.arr_open}{fmt.item_sep.join(dump(v, fmt, top=False) for v in value)}{fmt.arr_close}"
    return str(value)


def candidates(*, raw_strings: bool, indented: bool = False) -> list[ValueFormat]:
    """The standard formats, most common first (each also with sorted keys). ``indented`` adds
    ``tojson(indent=2|4)`` at nesting depths 0-6 (a value inside an indented document)."""
    return list(_CANDIDATES[raw_strings] + (_INDENTED if indented else ()))


def _standard(raw_strings: bool) -> tuple[ValueFormat, ...]:
    base = [JSON_DEFAULT, JSON_COMPACT, JSON_ASCII, JSON_ASCII_COMPACT, PYTHON_STR, PYTHON_REPR]
    out = [replace(f, raw_strings=raw_strings) for f in base]
    return (*out, *(replace(f, sort_keys=True) for f in out if f.kind not in ("python_str", "python_repr")))


_CANDIDATES = {raw: _standard(raw) for raw in (False, True)}  # (built once: the analysis asks often)
_INDENTED = tuple(ValueFormat(indent=n, indent_base=n * depth, ensure_ascii=ascii_)
                  for n in (2, 4) for depth in range(7) for ascii_ in (False, True))


def dialect_from(*, str_open: str, str_close: str, key_open: str, key_close: str, kv_sep: str, item_sep: str,
                 obj_open: str, obj_close: str, raw_strings: bool) -> ValueFormat:
    """A JSON-like dialect from pieces seen in renders (arrays and literals as in JSON)."""
    return ValueFormat(kind="dialect", raw_strings=raw_strings, str_open=str_open, str_close=str_close,
                       escape="none", key_open=key_open, key_close=key_close, kv_sep=kv_sep, item_sep=item_sep,
                       obj_open=obj_open, obj_close=obj_close)


def find_format(samples: list[tuple[Any, str]], options: list[ValueFormat]) -> ValueFormat | None:
    """The first format that writes every ``value`` exactly as its ``text``."""
    for fmt in options:
        if all(dump(v, fmt) == text for v, text in samples):
            return fmt
    return None
