"""Phase 2: how the template writes tool calls, learned from renders alone.

The method, in order:

1. Render assistant turns with tool calls, varying one thing at a time (the function name,
   the call id, the arguments, the number of calls) and cut out the tool block (what the
   model would generate after the assistant header).
2. Find the arguments: either one serialized value (JSON, Python, ...: a standard format
   that writes every probe's arguments exactly), or one unit per argument (tagged), whose
   literals come from the zero/one/two-argument renders and whose value formats come from
   one probe per JSON type.
3. Split the rest of the call around the name and id needles into literal parts; split the
   one-call block from the two-call block into section markers, per-call parts and the
   separator; detect call indices (``functions.f:0``) from digit runs that count up.
4. Verify: format every probe through the structure and compare with the template's own
   rendering, byte for byte. Probe values never become markers: every literal is constant
   across renders in which the probe values differ.
5. Classify the skeleton into the design's enums and fields (``FUNC_JSON_OBJECT`` with its
   field names, ``FUNC_TAG_WITH_NAME`` with prefix/suffix/close, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from . import probes as P
from .caps import ToolProbeForms, tool_call_messages, tool_forms
from .diff import common_prefix_len, common_suffix_len, diff
from .formatter import format_arguments, format_tool_calls
from .instructions import instructed_openers, read_instructions
from .markers import is_marker, tokenize
from .source_markers import alternative_openers
from .prober import Prober
from .reasoning import Reasoning
from .structures import ArgumentFormat, Caps, FunctionFormat, Part, ToolCallStructure, ValueFormat
from .turns import Turns, assistant_region
from .values import candidates, dialect_from, dump

# Probe argument keys, one per JSON type (schemas declare matching types: some templates
# write a type attribute from the schema).
K_INT, K_NUM, K_BOOL, K_NULL, K_ARR, K_OBJ = "count_key", "ratio_key", "flag_key", "empty_key", "list_key", "dict_key"
TYPE_PROBES: dict[str, tuple[str, Any]] = {
    "integer": (K_INT, 48213),
    "number": (K_NUM, 2.625),
    "boolean": (K_BOOL, True),
    "null": (K_NULL, None),
    "array": (K_ARR, [7, "Lyonq9needle"]),
    "object": (K_OBJ, {"inner_key": "Nantesq9needle", "depth": 2}),
}
TRICKY_ARGS: dict[str, dict[str, Any]] = {
    "tricky:nested": {K_OBJ: {"level": {"deep": [1, {"x": "y"}]}, "empty": {}}, K_ARR: [[1, 2], []]},
    "tricky:unicode": {P.ARG_S: "Zürich ünïcödé 日本語 🎉 ©"},
    "tricky:newlines_quotes": {P.ARG_S: 'line one\nline "two"\n\tand \'three\' \\ <b>&amp;</b>'},
    "tricky:numbers_bools": {K_INT: -7, K_NUM: 0.001, K_BOOL: False, K_NULL: None, "big_key": 12345678901234},
}
# The null-valued argument is declared a string: a "null" property type sends some templates'
# schema-printing macros into unbounded recursion.
# Special characters between anchor letters that no escape sequence uses: the rendering of
# each character can be read between its anchors.
ESCAPE_PROBE = "Q\nW\tX\"Y'Z\\K<V>J&H"
ESCAPE_CHARS = "\n\t\"'\\<>&"
_SCHEMA_TYPES = {P.ARG_S: "string", P.ARG_T: "string", K_INT: "integer", K_NUM: "number", K_BOOL: "boolean",
                 K_NULL: "string", K_ARR: "array", K_OBJ: "object", "big_key": "integer"}


# Spelled out though JSON Schema reads them so when absent: some templates print a type for every
# parameter and look these up unguarded (`json_spec.items`), failing on schemas without them.
_OPEN_SCHEMA = {"array": {"items": {}}, "object": {"additionalProperties": {}}}


def _make_probe_tools() -> list[dict[str, Any]]:
    props = {k: {"type": t, "description": f"probe {t}", **_OPEN_SCHEMA.get(t, {})} for k, t in _SCHEMA_TYPES.items()}
    return [P.tool_schema(n, props, required=[P.ARG_S]) for n in (P.FN_A, P.FN_B, P.FN_C)]


_PROBE_TOOLS = _make_probe_tools()


def probe_tools() -> list[dict[str, Any]]:
    """The probe tools (one shared list: renderers copy what they hand to a template)."""
    return _PROBE_TOOLS


Call = tuple[str, dict[str, Any], str]  # name, arguments, id


def _one(args: dict[str, Any], name: str = P.FN_A, cid: str = P.ID_A) -> list[Call]:
    return [(name, args, cid)]


ARGS_1 = {P.ARG_S: P.VAL_S}
ARGS_2 = {P.ARG_S: P.VAL_S, P.ARG_T: P.VAL_T}
PROBES: dict[str, list[Call]] = {
    "one": _one(ARGS_1),
    "one:name": _one(ARGS_1, name=P.FN_B),
    "one:id": _one(ARGS_1, cid=P.ID_B),
    "zero_args": _one({}),
    "two_args": _one(ARGS_2),
    "parallel": [(P.FN_A, ARGS_1, P.ID_A), (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B)],
    "parallel3": [(P.FN_A, ARGS_1, P.ID_A), (P.FN_B, {P.ARG_S: P.VAL_T}, P.ID_B), (P.FN_C, {}, P.ID_C)],
    **{f"type:{t}": _one({k: v}) for t, (k, v) in TYPE_PROBES.items()},
    **{name: _one(args) for name, args in TRICKY_ARGS.items()},
    "escape": _one({P.ARG_S: ESCAPE_PROBE}),
    **{f"escape:{i}": _one({P.ARG_S: f"Q{ch}W"}) for i, ch in enumerate(ESCAPE_CHARS)},
}
# Probes the formatter must reproduce (the list); the rest only serve inference.
VERIFY = ("one", "one:name", "one:id", "zero_args", "two_args", "parallel", "parallel3",
          *(f"type:{t}" for t in TYPE_PROBES), *TRICKY_ARGS)


class _Fail(Exception):
    """Inference could not go on; the message says why (reported in the structure)."""


@dataclass
class _Ctx:
    prober: Prober
    forms: ToolProbeForms
    turns: Turns
    reasoning: Reasoning | tuple[str, str] | None
    eot: str
    content_none: bool
    content_wrapper: tuple[str, str] | None = None  # an empty wrapper before calls is not theirs
    final_suffix: str = ""  # what the template writes after the last message
    blocks: dict[str, str | None] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    prompts: tuple[str, str] | None = None  # (the prompt with tools, its generation prompt)

    def block(self, probe: str) -> str | None:
        if probe not in self.blocks:
            self.blocks[probe] = self._render_block(probe, PROBES[probe])
        return self.blocks[probe]

    def _render_block(self, probe: str, calls: list[Call], content: str | None = None) -> str | None:
        tools = probe_tools()
        base = [P.user()]
        if content is None and not self.content_none:
            content = ""
        msg = tool_call_messages(self.forms, calls, content=content)
        out = self.prober.try_render(f"tools[{probe}]", base + [msg], tools=tools)
        if not isinstance(out, str):
            self.failures[probe] = out.reason
            return None
        plain, gen = self._prompts()
        first = min((i for i in (out.find(c[0], common_prefix_len(plain, out)) for c in calls) if i >= 0),
                    default=len(out))
        start, header = assistant_region(out, plain, gen, anchor=P.USER, limit=first)
        block = out[start + header:]
        # what ends the last message: the final suffix, else (a turn the template leaves without
        # its closer) the final suffix's part after the closer, else the closer
        after_turn = self.final_suffix[len(self.eot):] if self.eot and self.final_suffix.startswith(self.eot) else ""
        for tail in sorted((t for t in (self.final_suffix, after_turn, self.eot) if t), key=len, reverse=True):
            if block.endswith(tail):
                block = block[:-len(tail)]
                break
        block = _strip_empty_reasoning(block, self.reasoning)
        return _strip_empty_reasoning(block, self.content_wrapper) if self.content_wrapper else block

    def _prompts(self) -> tuple[str, str]:
        """The prompt of a user message with the probe tools, and the generation prompt after
        it (rendered for the first block; every block is read against them)."""
        if self.prompts is None:
            tools, base = probe_tools(), [P.user()]
            plain = self.prober.render("tools[prompt]", base, tools=tools) or ""
            full = self.prober.render("tools[generation_prompt]", base, tools=tools, add_generation_prompt=True) or plain
            self.prompts = (plain, full[common_prefix_len(plain, full, tokens=True):])
        return self.prompts


def _strip_empty_reasoning(block: str, r: Reasoning | tuple[str, str] | None) -> str:
    """Drop an empty reasoning block written before the calls (it is not part of them)."""
    if r is None:
        return block
    start, end = (r.start.strip(), r.end.strip()) if isinstance(r, Reasoning) else (r[0].strip(), r[1].strip())
    if not end:
        return block
    pattern = (r"\s*" + (re.escape(start) + r"\s*" if start else "") + re.escape(end) + r"\s*")
    m = re.match(pattern, block)
    if m is None and start:
        m = re.match(r"\s*" + re.escape(end) + r"\s*", block)
    return block[m.end():] if m else block


# --------------------------------------------------------------------------- parts helpers

def _slots(text: str, values: list[tuple[str, str]]) -> list[Part]:
    """Split ``text`` into literal parts and slots at each occurrence of the slot values."""
    parts: list[Part] = []
    i = 0
    while i < len(text):
        best = None
        for kind, val in values:
            if not val:
                continue
            j = text.find(val, i)
            if j >= 0 and (best is None or j < best[0]):
                best = (j, kind, val)
        if best is None:
            parts.append(Part("lit", text[i:]))
            break
        j, kind, val = best
        if j > i:
            parts.append(Part("lit", text[i:j]))
        parts.append(Part(kind))
        i = j + len(val)
    return _merge(parts)


def _merge(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    for p in parts:
        if p.kind == "lit" and not p.text:
            continue
        if p.kind == "lit" and out and out[-1].kind == "lit":
            out[-1] = Part("lit", out[-1].text + p.text)
        else:
            out.append(p)
    return out


def _render_parts(parts: list[Part], name: str, cid: str, index: int) -> list[tuple[Part, str]]:
    out = []
    for p in parts:
        if p.kind == "lit":
            out.append((p, p.text))
        elif p.kind == "name":
            out.append((p, name))
        elif p.kind == "id":
            out.append((p, cid))
        elif p.kind == "index":
            out.append((p, str(index + int(p.text or "0"))))
        else:
            out.append((p, ""))
    return out


def _split_at(parts: list[Part], name: str, cid: str, index: int, pos: int) -> tuple[list[Part], list[Part]]:
    """Split parts at character ``pos`` of their rendering (slots are never cut)."""
    left: list[Part] = []
    right: list[Part] = []
    i = 0
    for p, text in _render_parts(parts, name, cid, index):
        if i + len(text) <= pos:
            left.append(p)
        elif i >= pos:
            right.append(p)
        elif p.kind == "lit":
            left.append(Part("lit", p.text[:pos - i]))
            right.append(Part("lit", p.text[pos - i:]))
        else:
            raise _Fail(f"a section boundary falls inside a {p.kind} slot")
        i += len(text)
    return _merge(left), _merge(right)


def _text(parts: list[Part], name: str, cid: str, index: int) -> str:
    return "".join(t for _, t in _render_parts(parts, name, cid, index))


# --------------------------------------------------------------------------- arguments

@dataclass
class _Args:
    mode: str
    fmt: ValueFormat
    pre: str   # one-call block text before the arguments
    post: str  # after
    arg_parts: tuple[Part, ...] = ()
    sep: str = ""
    value_formats: tuple[tuple[str, ValueFormat], ...] = ()
    empty: str | None = None
    skip_null: bool = False


def _args_text(c: _Ctx, probe: str) -> tuple[dict[str, Any], str]:
    calls = PROBES[probe]
    return calls[0][1], c.block(probe) or ""


def _whole_fit(samples: list[tuple[dict[str, Any], str]], fmt: ValueFormat) -> tuple[str, str] | None:
    """The (before, after) frame when ``fmt`` writes every sample's arguments at one place."""
    edges = set()
    for args, block in samples:
        text = dump(args, fmt)
        i = block.find(text)
        if i < 0 or block.find(text, i + 1) >= 0:
            return None
        edges.add((block[:i], block[i + len(text):]))
    return edges.pop() if len(edges) == 1 else None


def _whole_args(c: _Ctx) -> _Args | None:
    """Arguments written as one value: the standard format that writes the basic probes, and
    of those the one that also writes most of the tricky ones (unicode, quotes, nesting)."""
    basic = [_args_text(c, p) for p in ["one", "two_args", *(f"type:{t}" for t in TYPE_PROBES)]
             if c.block(p) is not None]
    tricky = [_args_text(c, p) for p in TRICKY_ARGS if c.block(p) is not None]
    if len(basic) < 2:
        return None
    best: tuple[int, ValueFormat, tuple[str, str]] | None = None
    for fmt in candidates(raw_strings=False, indented=True):
        frame = _whole_fit(basic, fmt)
        if frame is None:
            continue
        score = sum(_whole_fit([t], fmt) == frame for t in tricky)
        if best is None or score > best[0]:
            best = (score, fmt, frame)
    if best is None:
        return None
    _, fmt, (pre, post) = best
    zero = c.block("zero_args")
    empty = None
    if zero is not None and zero != pre + dump({}, fmt) + post:
        empty = _middle(zero, pre, post)  # zero arguments written otherwise (even as nothing)
    return _Args("whole", fmt, pre, post, empty=empty)


def _canonical(text: str, values: list[tuple[str, str]]) -> list[Part]:
    """Slots of ``text`` with a literal (possibly empty) between and around every slot, so two
    units compare position by position."""
    out: list[Part] = []
    for p in _slots(text, values):
        if p.kind != "lit" and (not out or out[-1].kind != "lit"):
            out.append(Part("lit", ""))
        out.append(p)
    if not out or out[-1].kind != "lit":
        out.append(Part("lit", ""))
    return out


def _frame(zero: str | None, one: str, two: str) -> tuple[str, str]:
    """The text around the arguments: (before, after), from the zero/one-argument calls."""
    if zero is not None:
        d = diff(zero, one)
        if d.b_middle(one):
            return one[:d.prefix], one[d.b_end:]
    d = diff(one, two)  # no usable zero-argument call: the first argument starts the region
    pre = one[:d.prefix]
    k = pre.rfind(P.ARG_S)
    return (pre[:k] if k >= 0 else pre), one[d.a_end:]


def _middle(block: str | None, pre: str, post: str) -> str | None:
    if block is None or not (block.startswith(pre) and block.endswith(post)) or len(block) < len(pre) + len(post):
        return None
    return block[len(pre):len(block) - len(post)]


def _fill(template: list[Part], key: str, value: str) -> str:
    return "".join(p.text if p.kind == "lit" else key if p.kind == "key" else value for p in template)


JSON_RAW = replace(candidates(raw_strings=True)[0])


def _units_dump(template: list[Part], sep: str, value: Any, fmt: ValueFormat) -> str:
    if isinstance(value, dict):
        return sep.join(_fill(template, k, _units_dump(template, sep, v, fmt)) for k, v in value.items()
                        if v is not None)
    if isinstance(value, list):
        return sep.join(_fill(template, fmt.item_key, _units_dump(template, sep, v, fmt)) for v in value)
    if isinstance(value, bool) or value is None:
        return dump(value, JSON_RAW)
    return value if isinstance(value, str) else str(value)


def _units_format(template: list[Part], sep: str, region: str, value: Any) -> ValueFormat | None:
    """A value written as argument units again (objects) and ``item``-keyed units (arrays)."""
    lits = [p.text for p in template if p.kind == "lit"]
    item_key = ""
    if isinstance(value, list) and region.startswith(lits[0]):
        end = region.find(lits[1], len(lits[0])) if len(lits) > 1 and lits[1] else -1
        item_key = region[len(lits[0]):end] if end > 0 else ""
    fmt = ValueFormat(kind="units", raw_strings=True, item_key=item_key)
    return fmt if _units_dump(template, sep, value, fmt) == region else None


def _tagged_args(c: _Ctx) -> _Args:
    """Tagged arguments; the frame/unit boundary is ambiguous when the text before the first
    unit ends like a unit does (``ns<k>v ns</k>`` after ``... ns``), so every rotation is tried
    and the one under which most value types fit wins (nested values fit only the true one)."""
    zero, one, two = c.block("zero_args"), c.block("one"), c.block("two_args")
    if one is None or two is None:
        raise _Fail("the template does not render calls with arguments")
    pre, post = _frame(zero, one, two)
    unit = _middle(c.block("type:integer"), pre, post) or ""
    results = []
    for k in range(0, min(len(pre), len(unit)) + 1):
        if k and pre[len(pre) - k:] != unit[len(unit) - k:]:
            continue  # only text the frame and a unit both end with can move between them
        try:
            args = _tagged_args_in(c, zero, one, two, pre[:len(pre) - k], pre[len(pre) - k:] + post)
        except _Fail as e:
            if k == 0:
                first_error = e
            continue
        results.append((len(args.value_formats), -k, args))
    if not results:
        raise first_error
    return max(results, key=lambda r: (r[0], r[1]))[2]


def _tagged_args_in(c: _Ctx, zero: str | None, one: str, two: str, pre: str, post: str) -> _Args:
    m1, m2 = _middle(one, pre, post), _middle(two, pre, post)
    key_i, number = TYPE_PROBES["integer"]
    m_int = _middle(c.block("type:integer"), pre, post)
    if m1 is None or m2 is None:
        raise _Fail("calls with different arguments do not share a frame")
    if m_int is not None:
        template = _canonical(m_int, [("key", key_i), ("value", str(number))])
    else:  # the template takes only string values: the unit comes from a string argument
        template = _canonical(m1, [("key", P.ARG_S), ("value", P.VAL_S)])
    slots = [p.kind for p in template if p.kind != "lit"]
    if slots[:1] != ["key"] or "value" not in slots:
        raise _Fail("an argument unit is not <key ... value>")
    by_type: dict[str, list[str]] = {"integer": [p.text for p in template if p.kind == "lit"]}
    formats: dict[str, ValueFormat] = {"integer": JSON_RAW}
    found = _fit_value(template, "", P.ARG_S, P.VAL_S, m1, None)
    if found is None:
        raise _Fail("string arguments are not written like the other units")
    dialect: ValueFormat | None = None
    fmt_s, lits_s = found
    if lits_s != by_type["integer"]:
        d = _dialect_from_delims(lits_s, by_type["integer"], template)
        if d is not None:
            fmt_s, lits_s, dialect = d, by_type["integer"], replace(d, raw_strings=False)
    fmt_s = _learn_escapes(c, template, lits_s, pre, post, fmt_s)
    formats["string"], by_type["string"] = fmt_s, lits_s
    # separator and order, from two string arguments
    u_s = _unit_text(template, lits_s, P.ARG_S, dump(P.VAL_S, fmt_s))
    u_t = _unit_text(template, lits_s, P.ARG_T, dump(P.VAL_T, fmt_s))
    sort_keys = False
    if m2.startswith(u_s) and m2.endswith(u_t) and len(m2) >= len(u_s) + len(u_t):
        sep = m2[len(u_s):len(m2) - len(u_t)]
    elif m2.startswith(u_t) and m2.endswith(u_s) and len(m2) >= len(u_s) + len(u_t):
        sep, sort_keys = m2[len(u_t):len(m2) - len(u_s)], True
    else:
        raise _Fail("two arguments are not written as two units of one argument")
    if dialect is not None:
        dialect = replace(dialect, item_sep=sep or dialect.item_sep)
    skip_null = False
    for t, (key, value) in TYPE_PROBES.items():
        if t == "integer":
            continue
        m = _middle(c.block(f"type:{t}"), pre, post)
        if m is None:
            continue
        if t == "null" and m == "":
            skip_null = True
            continue
        fit = _fit_value(template, sep, key, value, m, dialect)
        if fit is not None:
            formats[t], by_type[t] = fit
    formats = _nested_literals(formats)
    arr, obj = formats.get("array"), formats.get("object")
    if arr is not None and obj is not None and arr.kind == obj.kind == "units":
        formats["object"] = replace(obj, item_key=arr.item_key)  # arrays nest inside objects too
    arg_parts = _typed_parts(template, by_type)
    empty = _middle(zero, pre, post) if zero is not None and zero != pre + post else None
    fmts = {t: (replace(f, sort_keys=sort_keys) if f.kind != "units" else f) for t, f in formats.items()}
    container = replace(fmts.get("object", JSON_RAW), sort_keys=sort_keys)
    return _Args("tagged", container, pre, post, tuple(arg_parts), sep, tuple(sorted(fmts.items())), empty,
                 skip_null=skip_null)


def _string_region(c: _Ctx, probe: str, template: list[Part], lits: list[str], pre: str, post: str) -> str | None:
    """The written form of probe ``probe``'s string value, cut out of its unit."""
    m = _middle(c.block(probe), pre, post)
    if m is None:
        return None
    frame = _unit_text(template, lits, P.ARG_S, "\x00").split("\x00")
    if len(frame) != 2 or not (m.startswith(frame[0]) and m.endswith(frame[1])):
        return None
    return m[len(frame[0]):len(m) - len(frame[1])]


def _learn_escapes(c: _Ctx, template: list[Part], lits: list[str], pre: str, post: str,
                   fmt: ValueFormat) -> ValueFormat:
    """How special characters in string values are written: as is, replaced one by one
    (``\n`` → ``\\n``, ``'`` → ``\\'``), or the whole string in a CDATA section."""
    region = _string_region(c, "escape", template, lits, pre, post)
    if region is None or region == dump(ESCAPE_PROBE, fmt):
        return fmt
    open_, close = (fmt.str_open, fmt.str_close) if not fmt.raw_strings else ("", "")
    if fmt.kind in ("python_repr", "python_str") and not fmt.raw_strings:
        q = region[:1]
        open_, close = q, q
    if not (region.startswith(open_) and region.endswith(close)):
        return fmt
    body = region[len(open_):len(region) - len(close)] if close else region[len(open_):]
    cdata = ""
    if body.startswith("<![CDATA[") and body.endswith("]]>"):
        for i, ch in enumerate(ESCAPE_CHARS):
            one = _string_region(c, f"escape:{i}", template, lits, pre, post) or ""
            if "<![CDATA[" in one:
                cdata += ch
        body = body[len("<![CDATA["):-len("]]>")]
    anchors = "QWXYZKVJH"
    table = []
    pos = 0
    for a, ch, nxt in zip(anchors, ESCAPE_CHARS, anchors[1:]):
        if body[pos:pos + 1] != a:
            return fmt
        end = body.find(nxt, pos + 1)
        if end < 0:
            return fmt
        written = body[pos + 1:end]
        if written != ch:
            table.append((ch, written))
        pos = end
    new = replace(fmt, kind="dialect" if fmt.kind in ("python_repr", "python_str") else fmt.kind,
                  escape="table", escapes=tuple(table), cdata_chars=cdata)
    if not fmt.raw_strings:
        new = replace(new, str_open=open_, str_close=close)
    return new if dump(ESCAPE_PROBE, new) == region else fmt


def _nested_literals(formats: dict[str, ValueFormat]) -> dict[str, ValueFormat]:
    """A container written in a JSON-like dialect writes null and booleans inside it as the
    template writes them as values of their own (the probes put none of them in containers):
    ``None`` where a null argument renders ``None``."""
    spell = {}
    if "null" in formats:
        spell["null"] = dump(None, formats["null"])
    if "boolean" in formats:
        spell["true"], spell["false"] = dump(True, formats["boolean"]), dump(False, formats["boolean"])
    return {t: (replace(f, **spell) if f.kind == "dialect" and t in ("array", "object") else f)
            for t, f in formats.items()}


def _unit_text(template: list[Part], lits: list[str], key: str, value: str) -> str:
    out, i = [], 0
    for p in template:
        if p.kind == "lit":
            out.append(lits[i])
            i += 1
        else:
            out.append(key if p.kind == "key" else value)
    return "".join(out)


def _typed_parts(template: list[Part], by_type: dict[str, list[str]]) -> list[Part]:
    """Unit parts; a literal that differs between value types becomes a typed part."""
    ref = by_type["integer"]
    parts: list[Part] = []
    i = 0
    for p in template:
        if p.kind != "lit":
            parts.append(p)
            continue
        texts = {t: v[i] for t, v in by_type.items() if len(v) == len(ref)}
        if len(set(texts.values())) <= 1:
            if ref[i]:
                parts.append(Part("lit", ref[i]))
        else:
            parts.append(Part("typed", by_type=tuple(sorted(texts.items()))))
        i += 1
    return parts


def _unit_parts(m: str, key: str, text: str, j: int) -> list[Part]:
    """Canonical parts of unit ``m`` with the value at ``j`` and the key wherever it occurs."""
    head = _canonical(m[:j], [("key", key)])
    tail = _canonical(m[j + len(text):], [("key", key)])
    return head + [Part("value")] + tail


def _fit_value(template: list[Part], sep: str, key: str, value: Any, m: str,
               dialect: ValueFormat | None) -> tuple[ValueFormat, list[str]] | None:
    """The format writing ``value`` in unit text ``m``, and the unit's literals (which may differ
    from the integer unit's: type-dependent literals such as ``string="true"``)."""
    kinds = [p.kind for p in template]
    ref = [p.text for p in template if p.kind == "lit"]
    options = candidates(raw_strings=True) + candidates(raw_strings=False)
    if dialect is not None:
        options += [dialect, replace(dialect, sort_keys=True)]
    if isinstance(value, (dict, list)):
        frame = _fill(template, key, "\x00").split("\x00")
        if len(frame) == 2 and m.startswith(frame[0]) and m.endswith(frame[1]):
            units = _units_format(template, sep, m[len(frame[0]):len(m) - len(frame[1])], value)
            if units is not None:
                options = [units] + options
    best: tuple[int, ValueFormat, list[str]] | None = None
    for fmt in options:
        text = _units_dump(template, sep, value, fmt) if fmt.kind == "units" else dump(value, fmt)
        j = m.find(text)
        while j >= 0:  # a short value ("null", "1") may also occur inside a literal
            parts = _unit_parts(m, key, text, j)
            if [p.kind for p in parts] == kinds:
                lits = [p.text for p in parts if p.kind == "lit"]
                score = sum(a != b for a, b in zip(lits, ref))
                if best is None or score < best[0]:
                    best = (score, fmt, lits)
            j = m.find(text, j + 1)
        if best is not None and best[0] == 0:
            break
    return (best[1], best[2]) if best else None


def _dialect_from_delims(lits: list[str], ref: list[str], template: list[Part]) -> ValueFormat | None:
    """Strings written between delimiters the numbers do not have (``<|"|>Paris<|"|>``): a
    JSON-like dialect whose keys and separators come from the unit itself."""
    kinds = [p.kind for p in template]
    vi = kinds.index("value")
    before_i = sum(1 for k in kinds[:vi] if k == "lit") - 1
    after_i = before_i + 1
    b, a, rb, ra = lits[before_i], lits[after_i], ref[before_i], ref[after_i]
    if not (b.startswith(rb) and a.endswith(ra)) or b == rb:
        return None
    str_open, str_close = b[len(rb):], a[:len(a) - len(ra)]
    return dialect_from(str_open=str_open, str_close=str_close, key_open="", key_close="", kv_sep=rb,
                        item_sep=",", obj_open="{", obj_close="}", raw_strings=False)


def _infer_args(c: _Ctx) -> _Args:
    whole = _whole_args(c)
    if whole is not None:
        return whole
    return _tagged_args(c)


# --------------------------------------------------------------------------- calls

def _call_parts(c: _Ctx, args: _Args) -> tuple[list[Part], list[Part]]:
    """Parts before and after the arguments in the one-call block."""
    values = [("name", P.FN_A), ("id", P.ID_A)]
    before = _slots(args.pre, values)
    after = _slots(args.post, values)
    return before, after


def _index_variants(parts: list[Part]) -> list[list[Part]]:
    """Alternatives where a lone digit in a literal is a call index (0- or 1-based)."""
    out = []
    for i, p in enumerate(parts):
        if p.kind != "lit":
            continue
        for m in re.finditer(r"(?<![0-9])[01](?![0-9])", p.text):
            new = list(parts[:i])
            if m.start():
                new.append(Part("lit", p.text[:m.start()]))
            new.append(Part("index", m.group(0)))
            if m.end() < len(p.text):
                new.append(Part("lit", p.text[m.end():]))
            new.extend(parts[i + 1:])
            out.append(new)
    return out


def _sections(c: _Ctx, args: _Args, before: list[Part], after: list[Part]
              ) -> tuple[list[Part], list[Part], list[Part], list[Part], str, bool]:
    """(section_start, call_before_args, call_after_args, section_end, separator, parallel)."""
    two = c.block("parallel")
    calls = PROBES["parallel"]
    if two is None or calls[1][0] not in two and calls[1][2] not in two:  # (the name, or the id that carries it)
        return [], before, after, [], "", False
    t1 = format_arguments(_structure_for_args(args), calls[0][1])
    t2 = format_arguments(_structure_for_args(args), calls[1][1])
    i1 = two.find(t1, len(_text(before, P.FN_A, P.ID_A, 0)) - 1 if before else 0)
    i2 = two.find(t2, i1 + len(t1)) if i1 >= 0 else -1
    if i1 < 0 or i2 < 0:
        raise _Fail("the arguments of two parallel calls were not found")
    mid = two[i1 + len(t1):i2]
    for b_parts, a_parts in [(before, after), *[(v, after) for v in _index_variants(before)],
                             *[(before, v) for v in _index_variants(after)]]:
        pre2 = _text(b_parts, P.FN_B, P.ID_B, 1)
        post1 = _text(a_parts, P.FN_A, P.ID_A, 0)
        # token-level: a section/call boundary never falls inside a marker
        lp = common_suffix_len(pre2, mid, tokens=True)
        ls = common_prefix_len(post1, mid[:len(mid) - lp], tokens=True)
        try:
            sec_start, call_pre = _split_at(b_parts, P.FN_B, P.ID_B, 1, len(pre2) - lp)
            call_post, sec_end = _split_at(a_parts, P.FN_A, P.ID_A, 0, ls)
        except _Fail:
            continue
        sep = mid[ls:len(mid) - lp]
        ts = replace(_structure_for_args(args), tool_section_start=_text(sec_start, "", "", 0),
                     tool_section_end=_text(sec_end, "", "", 0), call_separator=sep,
                     call_parts=tuple(_merge([*call_pre, Part("args"), *call_post])))
        if any(p.kind in ("name", "id") for p in sec_start + sec_end):
            continue
        three = c.block("parallel3")
        if format_tool_calls(ts, _as_calls(calls)) == two and (
                three is None or format_tool_calls(ts, _as_calls(PROBES["parallel3"])) == three):
            return sec_start, call_pre, call_post, sec_end, sep, True
    raise _Fail("two parallel calls do not repeat the one-call structure")


def _structure_for_args(args: _Args) -> ToolCallStructure:
    return ToolCallStructure(args_mode=args.mode, args_format=args.fmt, arg_parts=args.arg_parts,
                             arg_separator=args.sep, value_formats=args.value_formats, args_empty=args.empty,
                             skip_null_args=args.skip_null)


def _as_calls(calls: list[Call]) -> list[dict[str, Any]]:
    return [{"id": cid, "function": {"name": n, "arguments": a}} for n, a, cid in calls]


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


# --------------------------------------------------------------------------- entry point

def tools_section(prober: Prober, tools: Sequence[Any] | None = None, user: str = P.USER) -> str:
    """What passing ``tools`` (the probe tools by default) adds to the prompt of one ``user``
    message: the tools list and any instructions."""
    base = [P.user(user)]
    plain = prober.render("tools_section:none", base, add_generation_prompt=True) or ""
    with_tools = prober.render("tools_section", base, tools=tools or probe_tools(), add_generation_prompt=True) or ""
    d = diff(plain, with_tools)
    return d.b_middle(with_tools)


def _unsupported(reason: str, **extra: Any) -> ToolCallStructure:
    return ToolCallStructure(supports_tools=False, reason=reason, **extra)


def analyze_tools(prober: Prober, caps: Caps, turns: Turns, reasoning: Reasoning | None,
                  end_of_turn: str, content_wrapper: tuple[str, str] | None = None,
                  final_suffix: str = "") -> ToolCallStructure:
    """Phase 2 for the template behind ``prober`` (see the module docstring)."""
    ts = _analyze_tools(prober, caps, turns, reasoning, end_of_turn, content_wrapper, final_suffix)
    return ts if not ts.call_parts else _classify(ts, turns.default.prompt)


def _analyze_tools(prober: Prober, caps: Caps, turns: Turns, reasoning: Reasoning | None,
                   end_of_turn: str, content_wrapper: tuple[str, str] | None = None,
                   final_suffix: str = "") -> ToolCallStructure:
    if not caps.supports_tool_calls:
        if not caps.supports_tools:
            return _unsupported("template ignores `tools` and `tool_calls`")
        why = prober.failures.get("tool_call[object args]") or prober.failures.get("tool_call[string args]")
        if why is not None and why.kind == "raised":
            return _unsupported(f"template raises on assistant tool calls: {why.error}")
        read = read_instructions(tools_section(prober))
        if read is not None:
            return read
        return _unsupported("template renders the tools list but not assistant tool calls, "
                            "and its instructions state no call syntax that could be read")
    c = _Ctx(prober=prober, forms=tool_forms(caps), turns=turns, reasoning=reasoning, eot=end_of_turn,
             content_none=not caps.requires_nonnull_content,
             content_wrapper=content_wrapper if content_wrapper and content_wrapper[1].strip() else None,
             final_suffix=final_suffix)
    if c.block("one") is None:
        return _unsupported(f"the probe tool call failed to render: {c.failures.get('one', '?')}")
    try:
        args = _infer_args(c)
        before, after = _call_parts(c, args)
        sec_start, call_pre, call_post, sec_end, sep, parallel = _sections(c, args, before, after)
    except _Fail as e:
        return _unsupported(f"tool calls render, but their structure was not understood: {e}",
                            source="rendered")
    ts = replace(_structure_for_args(args), supports_tools=True, source="rendered",
                 tool_section_start=_text(sec_start, "", "", 0), tool_section_end=_text(sec_end, "", "", 0),
                 call_separator=sep, supports_parallel=parallel,
                 call_parts=tuple(_merge([*call_pre, Part("args"), *call_post])),
                 requires_nonnull_content=caps.requires_nonnull_content)
    ts = _content_and_reasoning(c, ts)
    return replace(_verify(c, ts), alt_openers=_alt_openers(c) + _instructed_openers(c, ts))


def _alt_openers(c: _Ctx) -> tuple[str, ...]:
    """Markers of the source's tool-call blocks that a conversation with a call (and its result,
    when the template takes one) does not render (see :mod:`analyzer.source_markers`)."""
    call = tool_call_messages(c.forms, PROBES["one"])
    shown = c.prober.render("alt_openers", [P.user(), call, P.tool_result(), P.assistant()], tools=probe_tools(),
                            add_generation_prompt=True) or c.block("one")
    if shown is None:
        return ()
    r = c.reasoning
    # the markers of the turn's own structure are never another call form
    own = [*(r if isinstance(r, tuple) else (r.start, r.end) if r is not None else ()),
           *(c.content_wrapper or ()), c.eot, c.final_suffix]
    return alternative_openers(c.prober.template.source, shown + "".join(own))


def _instructed_openers(c: _Ctx, ts: ToolCallStructure) -> tuple[str, ...]:
    """For calls rendered as bare JSON objects (no marker before them): the prefix the
    template's instructions glue to their example call (see :func:`instructed_openers`)."""
    first = ts.call_parts[0] if ts.call_parts else None
    if ts.tool_section_start.strip() or first is None or first.kind != "lit" or not first.text.startswith("{"):
        return ()
    names = tuple(t["function"]["name"] for t in probe_tools())
    return instructed_openers(tools_section(c.prober), first.text, names)


def _content_and_reasoning(c: _Ctx, ts: ToolCallStructure) -> ToolCallStructure:
    block = c._render_block("content+calls", PROBES["one"], content=P.CONTENT)
    after_content, before_content, sep = False, False, ""
    if block is not None and P.CONTENT in block:
        calls_text = format_tool_calls(ts, _as_calls(PROBES["one"]))
        i = block.find(P.CONTENT) + len(P.CONTENT)
        j = block.find(calls_text, i)
        if j >= 0:
            after_content, sep = True, block[i:j]
        else:  # the calls, then the content (before the section's end, or after it)
            end = ts.tool_section_end
            core = calls_text[:-len(end)] if end and calls_text.endswith(end) else calls_text
            k = block.find(core)
            before_content = 0 <= k and k + len(core) <= block.find(P.CONTENT)
    # reasoning on a tool-call turn, written the way this template takes reasoning
    r = c.reasoning if isinstance(c.reasoning, Reasoning) else None
    shape = P.reasoning_fields(r.field if r and r.field else "reasoning_content", P.REASONING, "")
    # the reasoning's own fields (content blocks carry the reasoning; a plain content is the call's)
    fields = {k: v for k, v in shape.items() if k != "content" or not isinstance(v, str)}
    msg = tool_call_messages(c.forms, PROBES["one"], **fields)
    kwargs = dict(r.probe_kwargs) if r else {}
    out = c.prober.render("tools[reasoning+calls]", [P.user(), msg], tools=probe_tools(), **kwargs)
    keeps = out is not None and P.REASONING in out
    return replace(ts, calls_after_content=after_content, content_after_calls=before_content, content_separator=sep,
                   reasoning_on_tool_turns=keeps)


def _verify(c: _Ctx, ts: ToolCallStructure) -> ToolCallStructure:
    ok, bad = [], []
    for probe in VERIFY:
        calls = PROBES[probe]
        if not ts.supports_parallel and len(calls) > 1:
            continue  # the template writes (or accepts) one call per turn
        block = c.block(probe)
        if block is None:
            bad.append((probe, f"template failed: {c.failures.get(probe, '?')}"))
            continue
        mine = format_tool_calls(ts, _as_calls(calls))
        if mine == block:
            ok.append(probe)
        else:
            k = common_prefix_len(mine, block)
            bad.append((probe, f"differs at {k}: formatter {mine[k:k + 40]!r} vs template {block[k:k + 40]!r}"))
    return replace(ts, verified=tuple(ok), unverified=tuple(bad))


def template_tool_block(template: Any, analysis: Any, calls: list[Call]) -> str | None:
    """The template's own rendering of ``calls`` as the model would write them (the tool block
    after the assistant header), or None when the template refuses them.

    ``template`` is a LoadedTemplate and ``analysis`` its TemplateAnalysis.
    """
    prober = Prober(template, engine=analysis.engine)
    prober.content_format = analysis.caps.content_format
    cs = analysis.content_structure
    c = _Ctx(prober=prober, forms=tool_forms(analysis.caps), turns=None,  # type: ignore[arg-type]
             reasoning=(cs.reasoning_start, cs.reasoning_end), eot=analysis.end_of_turn,
             content_none=not analysis.caps.requires_nonnull_content, final_suffix=analysis.final_suffix,
             content_wrapper=(cs.content_start, cs.content_end) if cs.content_end.strip() else None)
    return c._render_block("example", calls)


EXAMPLE_CALLS: list[Call] = [("get_weather", {"location": "Paris, France", "days": 3, "metric": True}, "call0001A")]
