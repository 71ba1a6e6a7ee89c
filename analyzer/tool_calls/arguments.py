"""The arguments: one serialized value in a standard format, or one unit per argument (tagged)
with its literals, value formats and escapes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from .. import probes as P
from ..diff import diff
from ..structures import Part, ValueFormat
from ..values import candidates, dialect_from, dump
from .context import ESCAPE_CHARS, ESCAPE_PROBE, PROBES, TRICKY_ARGS, TYPE_PROBES, _Ctx, _Fail
from .parts import _slots


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
