"""Read argument values back: the inverse of :func:`chat_autoparser.analyzer.values.dump`, to JSON.

Templates write values as JSON, Python literals (``True``, ``'x'``), or JSON-like dialects
(``{k:<|"|>v<|"|>}``). :class:`LiteralValue` scans one such value as it streams (strings with
their delimiters and escapes, brackets, bare words) and :func:`to_json_text` turns the text it
found into JSON text. Raw tagged values (``<parameter=k>Paris</parameter>``) are typed by the
tool's JSON schema instead (:func:`typed_json`).

Example::

    >>> to_json_text("{'a': True, 'b': [1, None]}", PYTHON)
    '{"a": true, "b": [1, null]}'
    >>> typed_json("42", {"type": "integer"})
    '42'
    >>> typed_json("42", {"type": "string"})
    '"42"'
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from json.encoder import encode_basestring
from typing import Any, Sequence

from chat_autoparser.analyzer.structures import ValueFormat

from .peg import NEED, Driven, Input, Run, deviate

PYTHON = ValueFormat(kind="python_repr")


def _unescape(body: str, fmt: ValueFormat) -> str:
    if fmt.escape == "table":
        for ch, written in sorted(fmt.escapes, key=lambda e: -len(e[1])):
            body = body.replace(written, ch)
        return body
    if fmt.escape == "json":
        try:
            return json.loads(f'"{body}"')
        except ValueError:
            return body
    return body


class _Reader:
    """Recursive-descent reader of one complete value written under ``fmt``."""

    def __init__(self, text: str, fmt: ValueFormat) -> None:
        self.s, self.i, self.fmt = text, 0, fmt

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def value(self) -> Any:
        self.ws()
        f, s = self.fmt, self.s
        if s.startswith(f.obj_open, self.i):
            self.i += len(f.obj_open)
            out: dict[str, Any] = {}
            self.ws()
            if s.startswith(f.obj_close, self.i):
                self.i += len(f.obj_close)
                return out
            while True:
                self.ws()
                key = self.key()
                self.ws()
                if not s.startswith(f.kv_sep.strip() or f.kv_sep, self.i):
                    raise ValueError("expected key separator")
                self.i += len(f.kv_sep.strip() or f.kv_sep)
                out[key] = self.value()
                self.ws()
                if s.startswith(f.obj_close, self.i):
                    self.i += len(f.obj_close)
                    return out
                sep = f.item_sep.strip() or f.item_sep
                if not s.startswith(sep, self.i):
                    raise ValueError("expected item separator")
                self.i += len(sep)
        if s.startswith(f.arr_open, self.i):
            self.i += len(f.arr_open)
            items: list[Any] = []
            self.ws()
            if s.startswith(f.arr_close, self.i):
                self.i += len(f.arr_close)
                return items
            while True:
                items.append(self.value())
                self.ws()
                if s.startswith(f.arr_close, self.i):
                    self.i += len(f.arr_close)
                    return items
                sep = f.item_sep.strip() or f.item_sep
                if not s.startswith(sep, self.i):
                    raise ValueError("expected item separator")
                self.i += len(sep)
        if f.str_open and s.startswith(f.str_open, self.i):
            self.i += len(f.str_open)
            j = s.find(f.str_close, self.i)
            if j < 0:
                raise ValueError("unterminated string")
            body = s[self.i:j]
            self.i = j + len(f.str_close)
            return _unescape(body, f)
        # the format's own literals first, then the other common spellings (templates that
        # print Python values inside a JSON-like dialect write None/True/False)
        for word, val in ((f.true, True), (f.false, False), (f.null, None), ("true", True), ("false", False),
                          ("null", None), ("True", True), ("False", False), ("None", None)):
            if word and s.startswith(word, self.i):
                self.i += len(word)
                return val
        j = self.i
        while j < len(s) and s[j] in "+-.0123456789eE":
            j += 1
        if j == self.i:
            raise ValueError(f"unexpected {s[self.i:self.i + 10]!r}")
        num = s[self.i:j]
        self.i = j
        return json.loads(num) if num.lstrip("-").replace(".", "", 1).isdigit() or "e" in num.lower() \
            else float(num)

    def key(self) -> str:
        f, s = self.fmt, self.s
        if f.key_open and s.startswith(f.key_open, self.i):
            self.i += len(f.key_open)
            j = s.find(f.key_close or f.key_open, self.i)
            if j < 0:
                raise ValueError("unterminated key")
            key = s[self.i:j]
            self.i = j + len(f.key_close or f.key_open)
            return key
        if s.startswith(("'", '"'), self.i):  # (quoted otherwise than the format quotes keys: Python's reader)
            raise ValueError("key in other quotes")
        j = self.i
        while j < len(s) and not s.startswith(f.kv_sep.strip() or f.kv_sep, j):
            j += 1
        key = s[self.i:j].strip()
        self.i = j
        return key


def _joins_strings(text: str) -> bool:
    """Two string literals side by side (``["a" "b"]``): Python reads one string, ``"ab"``; a
    model that forgot a comma wrote two."""
    if text.count('"') + text.count("'") < 4:
        return False
    last = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text.strip()).readline):
            if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if tok.type == tokenize.STRING and last == tokenize.STRING:
                return True
            last = tok.type
    except (tokenize.TokenError, SyntaxError):  # unreadable: literal_eval says why
        return False
    return False


def parse_value(text: str, fmt: ValueFormat) -> Any:
    """The Python value ``text`` writes under ``fmt`` (ValueError if it does not, or if it is
    not a JSON value: ``{ {}}`` reads in Python as a set holding a dict)."""
    if fmt.kind in ("json",) and not fmt.raw_strings:
        return json.loads(text)
    if fmt.kind in ("python_repr", "python_str"):
        if _joins_strings(text):
            raise ValueError("strings written side by side (Python would join them)")
        try:
            value = ast.literal_eval(text.strip())
            json.dumps(value)
        except (TypeError, RecursionError, MemoryError) as e:
            raise ValueError(f"not a JSON value: {e}") from None
        return value
    reader = _Reader(text, fmt)
    value = reader.value()
    reader.ws()
    if reader.i != len(text):
        raise ValueError("trailing text after value")
    return value


def to_json_text(text: str, fmt: ValueFormat) -> str:
    """JSON text for a value written under ``fmt`` (ValueError if unreadable)."""
    return json.dumps(parse_value(text, fmt), ensure_ascii=False, allow_nan=False)  # (1e999: not JSON)


def schema_type(schema: dict[str, Any] | None) -> str | None:
    """The first non-null JSON type a schema allows (``anyOf``/``oneOf``/type lists)."""
    if not isinstance(schema, dict):
        return None
    t = schema.get("type")
    if isinstance(t, str) and t != "null":
        return t
    if isinstance(t, list):
        return next((x for x in t if x != "null"), None)
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or []:
            st = schema_type(sub)
            if st is not None:
                return st
    if "enum" in schema and schema["enum"]:
        v = schema["enum"][0]
        return "string" if isinstance(v, str) else None
    return None


def unwrap_cdata(raw: str) -> str:
    """``<![CDATA[text]]>`` → ``text`` (XML-ish formats wrap values with markup that way)."""
    s = raw.strip()
    if s.startswith("<![CDATA[") and s.endswith("]]>"):
        return s[len("<![CDATA["):-len("]]>")]
    return raw


def unterminated(raw: str, fmt: ValueFormat) -> str | None:
    """The text of a string value cut off before its closing quote (None if ``raw`` is not one)."""
    for q_open, q_close in [(fmt.str_open, fmt.str_close), ("'", "'"), ('"', '"')]:
        if q_open and raw.startswith(q_open) and not raw[len(q_open):].endswith(q_close):
            return raw[len(q_open):]
    return None


encode_string = encode_basestring  # json.dumps(text, ensure_ascii=False), without its wrapping
_INTEGER = re.compile(r"0|-?[1-9][0-9]*")  # an integer written as JSON writes it back
_INTEGER_TEXT = re.compile(r"[-+]?[0-9]+")  # an integer as text writes it (leading zeros, a sign)
_NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
MAX_NUMBER_TEXT = 400  # longer "numbers" stay strings (int() of thousands of digits raises)


def allows_null(schema: dict[str, Any] | None) -> bool:
    """Whether a parameter's schema admits null (``"type": [..., "null"]``, an ``anyOf`` /
    ``oneOf`` branch of type null, OpenAPI's ``nullable``).

    Example::

        >>> allows_null({"type": ["string", "null"]}), allows_null({"type": "string"})
        (True, False)
    """
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    if t == "null" or isinstance(t, list) and "null" in t or schema.get("nullable") is True:
        return True
    return any(allows_null(sub) for key in ("anyOf", "oneOf") for sub in schema.get(key) or [])


def _number_json(text: str, integer: bool) -> str | None:
    """JSON for a number written as text (``007``, ``+3``, ``.5``) when the schema asks for one;
    None when ``text`` is no such number."""
    if len(text) > MAX_NUMBER_TEXT:
        return None
    if _INTEGER_TEXT.fullmatch(text):
        return str(int(text))
    if not integer and _NUMBER_TEXT.fullmatch(text):
        value = float(text)
        return json.dumps(value) if value == value and abs(value) != float("inf") else None
    return None


def typed_json(raw: str, schema: dict[str, Any] | None, fmt: ValueFormat | None = None) -> str:
    """JSON text for a raw tagged value, typed by the parameter's schema: strings stay strings
    (``"007"`` for a ``string``); a number as text writes it (``007``) for an ``integer`` or a
    ``number``; ``null`` / ``None`` for a parameter that admits null; booleans, arrays and objects
    read as JSON (or the template's own format). A value that fits none stays the string it was.

    Example::

        >>> typed_json("007", {"type": "integer"}), typed_json("007", {"type": "string"})
        ('7', '"007"')
        >>> typed_json("null", {"type": ["string", "null"]}), typed_json("null", {"type": "string"})
        ('null', '"null"')
    """
    t = schema_type(schema)
    text = raw.strip()
    if t in ("integer", "number") and len(text) <= MAX_NUMBER_TEXT and _INTEGER.fullmatch(text):
        return text
    if (text == "null" or text == "None") and allows_null(schema):  # (JSON's null, Python's)
        return "null"
    if t in ("integer", "number"):
        number = _number_json(text, t == "integer")
        if number is not None:
            return number
    if t in (None, "string"):
        if t is None and fmt is not None and not fmt.raw_strings:
            try:
                return to_json_text(raw, fmt)
            except (ValueError, SyntaxError):
                pass
        return json.dumps(raw, ensure_ascii=False)
    for reader in ([fmt] if fmt is not None else []) + [ValueFormat(), PYTHON]:
        try:
            return json.dumps(parse_value(raw.strip(), reader), ensure_ascii=False, allow_nan=False)
        except (ValueError, SyntaxError):  # (unreadable, or a number JSON cannot write: 1e999)
            continue
    if t == "boolean" and raw.strip() in ("True", "False", "true", "false"):
        return "true" if raw.strip().lower() == "true" else "false"
    return json.dumps(raw, ensure_ascii=False)


class LiteralValue(Driven):
    """One value written under ``fmt`` (a quoted string, bracketed structure or bare word),
    scanned as it streams; ends before the first character that cannot continue it.
    Emits its raw text as one chunk when complete (it is converted to JSON afterwards)."""

    def __init__(self, fmt: ValueFormat, tag: str | None = None, stops: Sequence[str] = (),
                 python_quotes: bool = False, own_quotes: Sequence[str] | None = None) -> None:
        self.fmt = fmt
        self.tag = tag
        self.stops = tuple(s for s in stops if s)  # markers that end a bare word (what follows the value)
        self.opens = [x for x in (fmt.obj_open, fmt.arr_open) if x]
        self.closes = {fmt.obj_open: fmt.obj_close, fmt.arr_open: fmt.arr_close}
        quotes = [(fmt.str_open, fmt.str_close)] if fmt.str_open else []
        if fmt.kind in ("python_repr", "python_str") or python_quotes:  # (models quote as Python does)
            quotes = list(dict.fromkeys([("'''", "'''"), ('"""', '"""'), *quotes, ("'", "'"), ('"', '"')]))
        self.quotes = quotes
        # the quotes the template writes around a value (a value in another is a deviation); all by default
        self.own_quotes = frozenset(q for q, _ in quotes) if own_quotes is None else frozenset(own_quotes)
        # a backslash escapes the closing quote when the format escapes with backslashes
        self.backslash = (fmt.escape in ("json", "python") or fmt.kind.startswith("python") or python_quotes
                          or any(w.startswith("\\") for _, w in fmt.escapes))

    def _partial(self, inp: Input, pos: int, stack: list[str]) -> bool:
        """The input ends inside what may be a multi-character quote or bracket."""
        tail = inp.get(pos, inp.end)
        return any(len(t) > len(tail) and t.startswith(tail)
                   for t in [q for q, _ in self.quotes] + self.opens + stack[-1:] + list(self.stops))

    def run(self, inp: Input, pos: int) -> Run:
        start = pos
        stack: list[str] = []
        while True:
            if pos >= inp.end:
                if inp.eof:
                    break
                yield NEED
                continue
            if not inp.eof and self._partial(inp, pos, stack):
                yield NEED  # a quote or bracket of several characters may be starting here
                continue
            if pos == start and inp.get(pos, pos + 1) in ",)]}":
                break  # (no value starts with what ends one: ``key=)`` has none)
            if not stack and pos > start and (inp.get(pos, pos + 1) in ",)]}" + " \n" and
                                              not any(inp.startswith(o, pos) for o in self.opens)
                                              or any(inp.startswith(s, pos) for s in self.stops)):
                break
            matched = False
            for q_open, q_close in self.quotes:
                if inp.startswith(q_open, pos):
                    if q_open not in self.own_quotes and not stack:  # (nested ones: the format's dialect)
                        deviate(inp, pos, f"a string quoted with {q_open}")
                    j = pos + len(q_open)
                    while True:
                        k = inp.find(q_close, j)
                        if k < 0:
                            if inp.eof:  # cut off inside the string: every character is kept
                                inp.events.append(("error", pos, "output ends inside a string value"))
                                inp.emit(inp.tag(self.tag), inp.get(start, inp.end), inp.end)
                                return inp.end
                            if not self.backslash:  # only the tail may still hold the closer
                                j = max(j, inp.end - len(q_close) + 1)
                            yield NEED
                            continue
                        if self.backslash:
                            backslashes = 0
                            while k - 1 - backslashes >= j and inp.get(k - 1 - backslashes, k - backslashes) == "\\":
                                backslashes += 1
                            if backslashes % 2:
                                j = k + 1
                                continue
                        pos = k + len(q_close)
                        break
                    matched = True
                    break
            if matched:
                if not stack:
                    break
                continue
            opened = next((o for o in self.opens if inp.startswith(o, pos)), None)
            if opened:
                stack.append(self.closes[opened])
                pos += len(opened)
                continue
            if stack and inp.startswith(stack[-1], pos):
                pos += len(stack.pop())
                if not stack:
                    break
                continue
            pos += 1
        if pos == start:
            return inp.fail(pos, "expected a value")
        inp.emit(inp.tag(self.tag), inp.get(start, pos), pos)
        return pos
