"""GBNF grammar for the tool-call part of a model's output.

One emitter for every format: a tool call is its skeleton (literal parts, the tool's name, an
id, an index, the arguments), and arguments are either one value written under the template's
:class:`~chat_autoparser.analyzer.structures.ValueFormat` (JSON, Python, a dialect) or one unit per argument.
Values follow each tool's JSON schema: types, enums, const, required/optional properties,
nested objects and arrays, ``anyOf``/``oneOf``. Reasoning and content stay free text.

Portability (see ``notes/dependencies.md``): no empty alternatives (optional groups instead),
no ``\\u`` escapes (non-ASCII is written as raw UTF-8), no left recursion, ``|`` only inside a
line, no token syntax.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {
    ...     "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
    >>> "root ::=" in build_gbnf(a, tools)
    True
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.structures import Part, ReasoningMode, TemplateAnalysis, ToolCallStructure, ValueFormat
from chat_autoparser.analyzer.values import dump

from .calls import channel_parts
from .message import split_turn_end
from .values import schema_type

JSON_STRING = r'"\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""'
JSON_NUMBER = r'"-"? ( [0-9] | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?'
JSON_INTEGER = r'"-"? ( [0-9] | [1-9] [0-9]{0,15} )'
WS = r"[ \t\n]{0,40}"  # indented JSON nests 4 spaces deep per level: room for 9 levels


def literal(text: str) -> str:
    """``text`` as GBNF: string literals (raw UTF-8; ASCII controls escaped), each whitespace
    character on its own. llguidance lexes literals greedily without backtracking: a
    ``"\n</end>"`` would commit at the newline and refuse the ``"\n"`` + ``"<next>"`` that
    another path allows; whitespace apart, the two readings share no literal."""
    if not text:
        return '""'
    pieces = re.findall(r"\s|\S+", text)
    return " ".join(_quote(p) for p in pieces)


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def chars(text: str) -> str:
    """``text`` as a sequence of one-character literals. After free text (a rule that takes
    anything but a stop word) the stop word is written this way: llguidance lexes literals
    greedily and without backtracking, so a multi-character ``"</arg_value>"`` would commit at
    ``</`` and refuse a value holding ``</b>``; single characters keep both readings open."""
    return " ".join(_quote(c) for c in text) if text else '""'


def _class_char(ch: str) -> str:
    if ch == "-":  # (``\-`` is refused by llguidance's GBNF reader; a hex escape is read by all)
        return "\\x2D"
    if ch in "\\]^[":
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if ord(ch) < 0x20:
        return f"\\x{ord(ch):02X}"
    return ch


class Grammar:
    """Rules by name; ``add`` returns the name (identical bodies share one rule)."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self._by_body: dict[str, str] = {}

    @staticmethod
    def clean(name: str) -> str:
        """A portable rule name: lower-case ASCII letters, digits and ``-``, starting with a
        letter, never ``start`` (llguidance renames ``root`` to it)."""
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-").lower() or "r"
        if not base[0].isalpha():
            base = "r-" + base
        return "start-rule" if base == "start" else base

    def add(self, name: str, body: str) -> str:
        if body in self._by_body:
            return self._by_body[body]
        base = self.clean(name)
        name, n = base, 1
        while name in self.rules:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self._by_body[body] = name
        return name

    def text(self) -> str:
        order = ["root"] + [k for k in self.rules if k != "root"]
        return "".join(f"{k} ::= {self.rules[k]}\n" for k in order if k in self.rules)

    # ---------------------------------------------------------------- text not containing a word

    def not_containing(self, word: str, name: str = "text") -> str:
        """A rule for any text (possibly empty, so use it as ``rule?``... it is written to be
        used directly: it always accepts the empty string through ``?``-groups) that never
        contains ``word``: the automaton that tracks the longest prefix of ``word`` just read."""
        if not word:
            return self.add(f"{name}-any", "[^\\x00]*")
        n = len(word)
        # KMP failure function
        fail = [0] * n
        k = 0
        for i in range(1, n):
            while k and word[i] != word[k]:
                k = fail[k - 1]
            if word[i] == word[k]:
                k += 1
            fail[i] = k

        def step(state: int, ch: str) -> int:
            while state and word[state] != ch:
                state = fail[state - 1]
            return state + 1 if word[state] == ch else 0

        digest = hashlib.sha1(word.encode("utf-8")).hexdigest()[:8]  # stable across runs
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-").lower() or "text"
        names = [f"{base}-{digest}-s{i}" for i in range(n)]
        bodies: list[str] = []
        for s in range(n):
            alts: list[str] = []
            seen: set[str] = set()
            for ch in sorted(set(word)):
                t = step(s, ch)
                seen.add(ch)
                if t < n:
                    alts.append(f"{literal(ch)} {names[t]}")
            excl = "".join(_class_char(c) for c in sorted(seen))
            alts.append(f"[^{excl}] {names[0]}")
            bodies.append("( " + " | ".join(alts) + " )?")
        for nm, body in zip(names, bodies):
            self.rules[nm] = body
        return names[0]


# --------------------------------------------------------------------------- values

def _sep_rule(text: str) -> str:
    core = text.strip()
    return f"{literal(core)} {WS}" if core else (f"{WS}" if text else "")


class ValueEmitter:
    """Rules for values written under one ValueFormat, constrained by JSON schemas."""

    def __init__(self, g: Grammar, fmt: ValueFormat, prefix: str) -> None:
        self.g = g
        self.fmt = fmt
        self.prefix = prefix

    def string(self) -> str:
        f = self.fmt
        if f.kind in ("python_repr", "python_str"):
            return self.g.add("py-string", "\"'\" ( [^'\\\\] | \"\\\\\" [^\\x00] )* \"'\" | "
                                           "\"\\\"\" ( [^\"\\\\] | \"\\\\\" [^\\x00] )* \"\\\"\"")
        if f.kind == "json" or (f.escape == "json" and f.str_open == '"'):
            return self.g.add("json-string", JSON_STRING)
        body = self.g.not_containing(f.str_close or '"', f"{self.prefix}-str")
        return self.g.add(f"{self.prefix}-dstring", f"{literal(f.str_open)} {body} {chars(f.str_close)}")

    def literal_of(self, value: Any) -> str:
        return literal(dump(value, self.fmt, top=False))

    def value(self, schema: Mapping[str, Any] | None, name: str = "value") -> str:
        g, f = self.g, self.fmt
        schema = dict(schema or {})
        if "const" in schema:
            return g.add(f"{name}-const", self.literal_of(schema["const"]))
        if "enum" in schema and schema["enum"]:
            return g.add(f"{name}-enum", " | ".join(self.literal_of(v) for v in schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                alts = [self.value(s, f"{name}-alt") for s in schema[key]]
                return g.add(f"{name}-any", " | ".join(alts))
        t = schema.get("type")
        if isinstance(t, list):
            alts = [self.value({**schema, "type": x}, f"{name}-{x}") for x in t]
            return g.add(f"{name}-types", " | ".join(alts))
        if t == "string":
            return self.string()
        if t == "integer":
            return g.add("integer", JSON_INTEGER)
        if t == "number":
            return g.add("number", JSON_NUMBER)
        if t == "boolean":
            return g.add(f"{self.prefix}-bool", f"{literal(f.true)} | {literal(f.false)}" if f.kind not in
                         ("python_repr", "python_str") else '"True" | "False"')
        if t == "null":
            return g.add(f"{self.prefix}-null", literal("None" if f.kind.startswith("python") else f.null))
        if t == "array":
            item = self.value(schema.get("items"), f"{name}-item")
            return self.array(item, name)
        if t == "object" or "properties" in schema:
            return self.object(schema, name)
        return self.any_value()

    def array(self, item: str, name: str) -> str:
        f = self.fmt
        sep = _sep_rule(f.item_sep)
        return self.g.add(f"{name}-array", f"{literal(f.arr_open)} {WS} ( {item} ( {WS} {sep} {item} )* )? {WS} "
                                           f"{literal(f.arr_close)}")

    def key(self, key: str) -> str:
        f = self.fmt
        if f.kind in ("python_repr", "python_str"):
            return literal(repr(key))
        return literal(f"{f.key_open}{key}{f.key_close}") if f.kind != "json" else literal(json.dumps(key))

    def object(self, schema: Mapping[str, Any], name: str) -> str:
        f = self.fmt
        props = dict(schema.get("properties") or {})
        if not props:
            return self.any_object()
        required = set(schema.get("required") or [])
        keys = sorted(props) if f.sort_keys else list(props)
        kv = _sep_rule(f.kv_sep)
        items = [(k, f"{self.key(k)} {WS} {kv} {self.value(props[k], f'{name}-{k}')}", k in required) for k in keys]
        chain = chain_rule(self.g, f"{name}-props", items, f"{WS} {_sep_rule(f.item_sep)}",
                           end=f"{WS} {literal(f.obj_close)}")
        return self.g.add(f"{name}-object", f"{literal(f.obj_open)} {WS} {chain}")

    def any_value(self) -> str:
        g = self.g
        name = g.clean(f"{self.prefix}-any-value")
        if name in g.rules:
            return name
        g.rules[name] = "__pending__"
        f = self.fmt
        if f.kind in ("python_repr", "python_str"):
            scalars = f'{self.string()} | {g.add("number", JSON_NUMBER)} | "True" | "False" | "None"'
        else:
            scalars = (f'{self.string()} | {g.add("number", JSON_NUMBER)} | {literal(f.true)} | {literal(f.false)} | '
                       f'{literal(f.null)}')
        arr = self.array(name, f"{self.prefix}-any")
        obj = self.any_object(name)
        g.rules[name] = f"{scalars} | {arr} | {obj}"
        return name

    def any_object(self, value_rule: str | None = None) -> str:
        f = self.fmt
        value_rule = value_rule or self.any_value()
        key = self.string() if f.key_open else self.g.add(f"{self.prefix}-bare-key", "[a-zA-Z_] [a-zA-Z0-9_]*")
        kv = f"{key} {WS} {_sep_rule(f.kv_sep)} {value_rule}"
        sep = _sep_rule(f.item_sep)
        return self.g.add(f"{self.prefix}-any-object", f"{literal(f.obj_open)} {WS} ( {kv} ( {WS} {sep} {kv} )* )? "
                                                       f"{WS} {literal(f.obj_close)}")


def chain_rule(g: Grammar, name: str, items: Sequence[tuple[str, str | Sequence[str], bool]], sep: str, end: str = "",
               allow_none: bool = True) -> str:
    """Properties in order: required ones always, optional ones maybe; ``sep`` between the ones
    present; then ``end`` (what closes them: the object's brace, the call's closing tag).

    ``end`` belongs inside: every rule then ends with it, so none ends in an optional part.
    llguidance turns a rule of terminals into one greedy lexeme, and a lexeme that may go on
    (``, "tags": ...``) swallows the start of what follows it (``,`` or a newline before a
    closing tag) and fails later. Without ``end``, a rule that may match nothing only when every
    item is optional is returned already optional (``( ... )?``). ``allow_none=False``: at least
    one item even when all are optional."""
    n = len(items)
    cache: dict[tuple[int, bool], str | None] = {}
    # items given as token lists share their leading tokens (a tag opener before the key):
    # written once before the choice of item, for the same reason as the separator
    toks = [list(kv) if not isinstance(kv, str) else [kv] for _, kv, _ in items]
    head: list[str] = []
    while n > 1 and all(len(t) > len(head) + 1 for t in toks) and len({t[len(head)] for t in toks}) == 1:
        head.append(toks[0][len(head)])
    tails = [" ".join(t[len(head):]) for t in toks]

    def nonempty(i: int, has_prev: bool) -> str | None:
        """Rule for a non-empty run of items starting at or after ``i`` (then ``end``)."""
        if i >= n:
            return None
        key = (i, has_prev)
        if key in cache:
            return cache[key]
        if has_prev:
            # the separator once, before the choice of the next item (not at the head of each)
            rule = g.add(f"{name}-{i}p", f"{sep} {nonempty(i, False)}") if sep else nonempty(i, False)
        else:
            rule = g.add(f"{name}-{i}", " ".join(head + [choice(i)])) if head else choice(i)
        cache[key] = rule
        return rule

    def choice(i: int) -> str:
        """Item ``i`` (without the shared head) and what follows it, or, when optional, a later one."""
        rest = after(i + 1)
        alts = [tails[i] + (f" {rest}" if rest else "")]
        if not items[i][2] and i + 1 < n:
            alts.append(choice(i + 1))
        return g.add(f"{name}-{i}c", " | ".join(alts))

    def after(i: int) -> str | None:
        """What follows a present item: the rest, which may be empty unless something required."""
        rule = nonempty(i, True)
        if rule is None:
            return end or None
        if any(req for _, _, req in items[i:]):
            return rule
        return g.add(f"{name}-{i}e", f"{rule} | {end}") if end else f"( {rule} )?"

    first = nonempty(0, False)
    if first is None:
        return end
    if any(req for _, _, req in items) or not allow_none:
        return first
    return g.add(f"{name}-or-none", f"{first} | {end}") if end else f"( {first} )?"


# --------------------------------------------------------------------------- calls

def _tool_list(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for t in tools or []:
        fn = t.get("function", t)
        out.append({"name": fn["name"], "parameters": fn.get("parameters") or {}})
    return out


def _tagged_args(g: Grammar, ts: ToolCallStructure, tool: dict[str, Any], prefix: str, end: str = "") -> str:
    """The arguments of one call as tagged parts, then ``end`` (see :func:`chain_rule`)."""
    params = tool["parameters"]
    props = dict(params.get("properties") or {})
    required = set(params.get("required") or [])
    formats = dict(ts.value_formats)
    keys = sorted(props) if ts.args_format.sort_keys else list(props)
    items = []
    for k in keys:
        schema = props[k]
        jt = schema_type(schema) or "string"
        fmt = formats.get(jt) or formats.get("string") or ValueFormat()
        parts = list(ts.arg_parts)
        seq: list[str] = []
        after_free = False
        for i, p in enumerate(parts):
            if p.kind == "lit":
                seq.append(chars(p.text) if after_free else literal(p.text))
                after_free = False
            elif p.kind == "key":
                seq.append(literal(k))
            elif p.kind == "typed":
                table = dict(p.by_type)
                text = table.get(jt) or table.get("number" if jt == "integer" else jt) or table.get("string", "")
                seq.append(literal(text))
            elif p.kind == "value":
                seq.append(_tagged_value(g, ts, fmt, schema, jt, parts, i, f"{prefix}-{k}"))
                after_free = True
        items.append((k, [x for x in seq if x != '""'], k in required))
    empty = " ".join(x for x in (literal(ts.args_empty) if ts.args_empty else "", end) if x and x != '""')
    if not items:
        return empty
    sep = literal(ts.arg_separator) if ts.arg_separator else ""
    if ts.args_empty and not any(r for _, _, r in items):
        some = chain_rule(g, f"{prefix}-args", items, sep, end=end, allow_none=False)
        return g.add(f"{prefix}-args-or-empty", f"{empty} | {some}")
    return chain_rule(g, f"{prefix}-args", items, sep, end=end)


def _closer_after(parts: Sequence[Part], i: int) -> str:
    for p in parts[i + 1:]:
        if p.kind == "lit" and p.text:
            return p.text
    return ""


def _tagged_value(g: Grammar, ts: ToolCallStructure, fmt: ValueFormat, schema: Mapping[str, Any], jt: str,
                  parts: Sequence[Part], i: int, name: str) -> str:
    if fmt.raw_strings and jt == "string" and "enum" not in schema and "const" not in schema:
        closer = _closer_after(parts, i) or ts.arg_separator
        return g.not_containing(closer.strip() or closer, f"{name}-raw")
    if fmt.kind == "units":
        closer = _closer_after(parts, i)
        return g.not_containing(closer.strip() or closer, f"{name}-raw")
    emitter = ValueEmitter(g, fmt if not fmt.raw_strings or jt != "string" else fmt, name)
    if fmt.raw_strings and jt == "string":  # enum/const strings written raw
        vals = schema.get("enum") or [schema.get("const")]
        return g.add(f"{name}-enum", " | ".join(literal(str(v)) for v in vals))
    return emitter.value(schema, name)


def _call_rule(g: Grammar, ts: ToolCallStructure, tool: dict[str, Any], index_name: str) -> str:
    return g.add(f"call-{tool['name']}", " ".join(_call_items(g, ts, tool)) or '""')


def _call_items(g: Grammar, ts: ToolCallStructure, tool: dict[str, Any]) -> list[str]:
    """The call of one tool as a sequence of grammar items."""
    prefix = f"call-{tool['name']}"
    seq: list[str] = []
    channel = channel_parts(ts)
    name_at = next((i for i, p in enumerate(ts.call_parts) if p.kind == "name"), -1)
    skip: set[int] = set()
    for i, p in enumerate(ts.call_parts):
        if i in skip:
            continue
        if p.kind == "lit" and channel is not None and i == name_at + 1:
            # header attributes in any order after the name, up to the header's end marker
            soup = g.not_containing(channel[2], f"{prefix}-header")
            seq.append(g.add(f"{prefix}-header-any", f"{literal(p.text)} | {soup} {chars(channel[2])}"))
        elif p.kind == "lit":
            seq.append(literal(p.text))
        elif p.kind == "name":
            seq.append(literal(tool["name"]))
        elif p.kind == "id":
            if not any(q.kind == "name" for q in ts.call_parts):  # the id carries the name
                # one rule of terminals only: llguidance reads it as one regex (split, its
                # greedy lexer would let the class swallow the name)
                seq.append(g.add(f"{prefix}-id", f"[a-zA-Z0-9_.-]* {literal(tool['name'])} [a-zA-Z0-9_.:-]*"))
            else:
                seq.append(g.add("call-id", "[a-zA-Z0-9_.:-]+"))
        elif p.kind == "index":
            seq.append(g.add("call-index", "[0-9]+"))
        elif p.kind == "args":
            if ts.args_mode == "tagged":
                nxt = ts.call_parts[i + 1] if i + 1 < len(ts.call_parts) else None
                end = ""
                if nxt is not None and nxt.kind == "lit" and not (channel is not None and i + 1 == name_at + 1):
                    end = literal(nxt.text)
                    skip.add(i + 1)  # written as the arguments' end (see chain_rule)
                seq.append(_tagged_args(g, ts, tool, prefix, end=end))
            else:
                emitter = ValueEmitter(g, ts.args_format, prefix)
                schema = dict(tool["parameters"]) or {"type": "object"}
                schema.setdefault("type", "object")
                seq.append(emitter.value(schema, f"{prefix}-args"))
        elif p.kind == "typed":
            seq.append(literal(next((t for _, t in p.by_type), "")))
    return [x for x in seq if x and x != '""']


def _alternatives(g: Grammar, name: str, seqs: list[list[str]]) -> str:
    """``seq1 | seq2 | ...`` with their common leading items written once: llguidance lexes
    greedily, so alternatives that begin alike must not be told apart before they differ."""
    if len(seqs) == 1:
        return g.add(name, " ".join(seqs[0]) or '""')
    k = 0
    while all(len(q) > k + 1 for q in seqs) and len({q[k] for q in seqs}) == 1:
        k += 1
    rests = [g.add(f"{name}-{i}", " ".join(q[k:])) for i, q in enumerate(seqs)]
    return g.add(name, " ".join(seqs[0][:k] + ["( " + " | ".join(rests) + " )"]))


def grammar_start(analysis: TemplateAnalysis) -> str:
    """When calls start with whitespace before their first word and have no section marker, a
    lazy grammar starts at the word (where a trigger matches): the word without the space."""
    ts = analysis.tool_call_structure
    if ts.tool_section_start.strip() or not ts.call_parts or ts.call_parts[0].kind != "lit":
        return ""
    first = ts.call_parts[0].text
    return first.lstrip() if first != first.lstrip() and first.strip() else ""


def tool_section_rule(g: Grammar, analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]],
                      parallel: bool, *, start: str = "full", at_trigger: bool = False) -> str:
    """The tool section. ``at_trigger``: it starts where its trigger word matched, so without
    the whitespace the template writes before that word. ``start``: ``"full"``, the section as
    written; ``"skip"``, without the first call's leading literal (the root writes it);
    ``"chars"``, its opening as one-character literals (it follows free text: see ``chars``)."""
    from dataclasses import replace
    ts = analysis.tool_call_structure
    if at_trigger and ts.tool_section_start:
        ts = replace(ts, tool_section_start=ts.tool_section_start.lstrip())
    tools_ = _tool_list(tools)
    call = _alternatives(g, "tool-call", [_call_items(g, ts, t) for t in tools_])
    first, opening = call, literal(ts.tool_section_start) if ts.tool_section_start else ""
    lead = ts.call_parts[0].text if ts.call_parts and ts.call_parts[0].kind == "lit" else ""
    if start != "full" and not ts.tool_section_start.strip() and lead:
        head = replace(ts, call_parts=ts.call_parts[1:])
        first = _alternatives(g, "first-call", [_call_items(g, head, t) for t in tools_])
        if start == "chars":  # free text before it takes any whitespace
            first, opening = f"{chars((ts.tool_section_start + lead).lstrip())} {first}", ""
    elif start == "chars" and ts.tool_section_start.strip():
        opening = chars(ts.tool_section_start.lstrip())
    if ts.content_after_calls and lead and parallel:  # free text may come where another call would start
        rest = _alternatives(g, "next-call", [_call_items(g, replace(ts, call_parts=ts.call_parts[1:]), t)
                                              for t in tools_])
        call = f"{chars(lead)} {rest}"
    sep = literal(ts.call_separator) if ts.call_separator else ""
    many = f"{first} ( {sep} {call} )*" if parallel and ts.supports_parallel else first
    end = ts.tool_section_end
    if ts.content_after_calls:  # the model may write its answer after the calls: free text, up to the end
        after = g.not_containing(end.strip(), "after-calls") if end.strip() else g.add("any-text", "[^\\x00]*")
        many = f"{many} {after}"
        end = end.strip()
    pieces = [opening, many, (chars(end) if ts.content_after_calls else literal(end)) if end else ""]
    return g.add("tool-calls", " ".join(p for p in pieces if p))


def build_gbnf(analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]] | None, *,
               tool_choice: str = "auto", parallel_tool_calls: bool = True, lazy: bool = True,
               mode: ReasoningMode | None = None) -> str | None:
    """The GBNF grammar for one request, or None when nothing needs constraining.

    ``lazy``: the grammar starts at the trigger (``root`` is the tool section); otherwise it
    covers the whole output: free reasoning (when the prompt opened it), free content, then
    the tool section (mandatory when ``tool_choice="required"``).
    """
    analysis = split_turn_end(analysis)[0]  # the model stops at the turn's end: not in the grammar
    ts = analysis.tool_call_structure
    if tool_choice == "none" or not tools or not ts.supports_tools or not ts.call_parts:
        return None
    g = Grammar()
    if lazy:
        # a pattern trigger matches from the call's first word: the grammar starts there too
        trig = grammar_start(analysis)
        section = tool_section_rule(g, analysis, tools, parallel_tool_calls, at_trigger=True,
                                    start="skip" if trig else "full")
        g.rules["root"] = f"{literal(trig)} {section}" if trig else section
        return g.text()
    section = tool_section_rule(g, analysis, tools, parallel_tool_calls, start="chars")
    cs = analysis.content_structure
    parts: list[str] = []
    if mode == ReasoningMode.FORCED_OPEN and cs.reasoning_end.strip():
        thought = g.not_containing(cs.reasoning_end.strip(), "reasoning")
        parts.append(f"{thought} {chars(cs.reasoning_end.strip())} {WS}")
    trigger = (ts.tool_section_start or next((p.text for p in ts.call_parts if p.kind == "lit" and p.text.strip()), ""))
    free = g.not_containing(trigger.strip() or trigger, "content") if trigger.strip() else ""
    if tool_choice == "required":
        parts += [free, section]
    else:
        parts += [free, f"( {section} )?"]
    g.rules["root"] = " ".join(p for p in parts if p)
    return g.text()


@dataclass(frozen=True, slots=True)
class GrammarBundle:
    """What constrains one request's output: the GBNF grammar (None without tools, or with
    ``tool_choice="none"``), whether it applies only once a trigger fires, the triggers, and the
    tokens a tokenizer must keep whole."""

    grammar: str | None = None
    lazy: bool = False
    triggers: list[dict[str, str]] = field(default_factory=list)
    preserved_tokens: list[str] = field(default_factory=list)


def grammar_bundle(analysis: TemplateAnalysis, tools: Sequence[Mapping[str, Any]] | None, tool_choice: str,
                   parallel_tool_calls: bool, mode: ReasoningMode) -> GrammarBundle:
    """The grammar, laziness, triggers and preserved tokens for a request whose parser reads
    reasoning in ``mode``."""
    from .triggers import grammar_triggers, preserved_tokens, use_lazy_grammar

    kept = preserved_tokens(analysis)
    if tool_choice == "none" or not tools or not analysis.tool_call_structure.supports_tools:
        return GrammarBundle(preserved_tokens=kept)
    triggers = grammar_triggers(analysis, tools)
    lazy = use_lazy_grammar(analysis, mode, tool_choice, triggers)
    grammar = build_gbnf(analysis, tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                         lazy=lazy, mode=mode)
    return GrammarBundle(grammar, lazy, triggers if lazy else [], kept)
