"""The call around its arguments: its parts, call indices, and the section markers, per-call
parts and separator found from the one- and two-call blocks."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from .. import probes as P
from ..diff import common_prefix_len, common_suffix_len
from ..formatter import format_arguments, format_tool_calls
from ..structures import Part, ToolCallStructure
from .arguments import _Args
from .context import Call, PROBES, _Ctx, _Fail
from .parts import _merge, _slots, _split_at, _text


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
