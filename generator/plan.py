"""Calls read whole in one step when the whole output is at hand (one-shot parsing).

The general parser reads a call part by part (literals piece by piece, each slot a region, each
argument a key and a value event) so that it can stream, bend to what models write and recover
from what they break. With the whole output at hand, a call the model wrote exactly as the
template writes it can be read with a few ``str.startswith``/``str.find`` steps instead: a
:class:`CallPlan`, compiled next to the general parser from the same skeleton, reads the
literals exactly and each slot with the general parser's own text reader (:meth:`Until.end_in`:
the same stops, fences and whitespace), and hands the call to the assembler as one condensed
event. On anything else (a literal written otherwise, a slot that does not end at its stop, a
value in a quoted format) it reads nothing and the general parser reads the call as usual. The
corpus checks that both ways give the same message (streaming always takes the general way).

Example::

    >>> from generator.peg import Marker, Until
    >>> name = Until([Marker(">")], to_end=False)
    >>> plan = CallPlan([lit_step("<call name=", False, True), (NAME, name), lit_step(">", True, False),
    ...                  (JSON, None), lit_step("</call>", False, False)])
    >>> plan.read('<call name=f>{"a": 1}</call>', 0)
    (28, 'f', None, '{"a": 1}')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .peg import DECODER, Input, Parser, Run, Until, number_cut

# the steps of a plan
LIT, NAME, ID, INDEX, JSON, UNITS, KEY, VALUE = "lit", "name", "id", "index", "json", "units", "key", "value"
Step = tuple[str, Any]

INDEX_TEXT = re.compile(r"\s*[0-9]*\s*")  # what an index slot holds
_PLAIN = re.compile(r'[^\x00-\x1f"\\]*')  # a JSON string's text that needs no escape
_JSON_WS = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class UnitsPlan:
    """Tagged arguments: units read by ``steps`` (literals, a key, a value), each starting with
    the literal ``lead``; ``empty``: what the template writes for no arguments."""

    steps: Sequence[Step]
    lead: str
    empty: str = ""


class CallPlan:
    """The canonical form of one call, as steps: literals read exactly; slots (name, id, index)
    read by the general parser's text reader; arguments as one JSON value or as tagged units."""

    def __init__(self, steps: Sequence[Step], *, json_strings: bool = False) -> None:
        self.steps = list(steps)
        self._ops = _compile(self.steps)
        # slots inside JSON strings: read only when written without escapes; the arguments a
        # JSON value that is not a string (a JSON-encoded string is the general reader's)
        self.json_strings = json_strings

    def read(self, text: str, i: int) -> tuple[int, str, str | None, str | list[tuple[str, str]]] | None:
        """``(end, name, id, arguments)`` of the call at ``i`` of a complete ``text`` (arguments:
        the JSON text, or the ``(key, value)`` texts of tagged units), or None when the call is
        not written in the canonical form."""
        got: dict[str, Any] = {}
        i = _run(self._ops, text, i, got)
        name, args = got.get(NAME, ""), got.get(JSON, got.get(UNITS))
        if i < 0 or not name.strip() or args is None:
            return None
        if self.json_strings and (not _PLAIN.fullmatch(name) or not _PLAIN.fullmatch(got.get(ID) or "")
                                  or args.startswith('"')):
            return None
        return i, name, got.get(ID), args

    def emit(self, inp: Input, pos: int) -> int:
        """Reads the call at ``pos`` of a whole input into one condensed event (``call``, or
        ``call_units`` for tagged arguments; see ``Assembler.handle``) inside its ``tool_call``
        region: the end, or -1 (nothing read) when it is not in the canonical form."""
        found = self.read(inp.text, pos - inp.base)
        if found is None:
            return -1
        end, name, call_id, args = found
        end += inp.base
        kind = "call" if isinstance(args, str) else "call_units"
        inp.events += [("open", "tool_call", pos), (kind, name, call_id, args, None), ("close", "tool_call", end, True)]
        inp.chunks += 1
        inp.chunk_pos = inp.region_end = inp.keep_from = end
        if inp.soft_pins:
            inp.soft_pins.clear()
        return end


def lit_step(text: str, raw_before: bool, raw_after: bool) -> Step:
    """A literal written as the template writes it, next to raw text (a name, a key, a value) on
    the sides given: there it takes only its own whitespace; next to other structure, any (as
    the general parser's :func:`~generator.skeleton.literal` does)."""
    if not text.strip():  # whitespace only: its own before raw text, else any
        return (LIT, ("", False, True)) if not raw_after else (LIT, (text, False, False))
    core = text if raw_before else text.lstrip()
    return (LIT, (core if raw_after else core.rstrip(), not raw_before, not raw_after))


# --------------------------------------------------------------------------- compiled steps
#
# ("lit", text, ws_before, ws_after)
# ("slot", kind, until, None): raw text up to where ``until`` ends it (the next step reads on)
# ("slot", kind, until, (core, ws, rest, ws_after)): the same, the literal after it read with it:
#     its first stop is ``core`` with the whitespace ``ws`` before it (what the general reader
#     takes with the marker), then ``rest``
# ("json",), ("units", UnitsPlan, ops)

def _compile(steps: Sequence[Step]) -> list[tuple]:
    ops: list[tuple] = []
    k = 0
    while k < len(steps):
        kind, arg = steps[k]
        nxt = steps[k + 1] if k + 1 < len(steps) else None
        if kind == LIT:
            ops.append((LIT, *arg))
        elif kind == JSON:
            ops.append((JSON,))
        elif kind == UNITS:
            ops.append((UNITS, arg, _compile(arg.steps[1:])))  # (the lead is read by the loop)
        else:
            fused = _fused(arg, nxt[1]) if nxt is not None and nxt[0] == LIT else None
            ops.append(("slot", kind, arg, fused))
            k += fused is not None
        k += 1
    return ops


def _fused(until: Until, lit: tuple[str, bool, bool]) -> tuple[str, str, str, bool] | None:
    """The literal after a slot, read with it, when the general reader's end before it is
    simple: its first stop is one marker that takes exactly the literal's leading line breaks."""
    text, ws_before, ws_after = lit
    ws = text[:len(text) - len(text.lstrip())]
    if ws_before or ws.strip("\r\n"):
        return None
    core = max((c for c in until.cores if text.startswith(c, len(ws))), key=len, default=None)
    rules = until.rules(core) if core is not None else []
    if len(rules) != 1 or rules[0].ws_before or rules[0].before != ws:
        return None
    return core, ws, text[len(ws) + len(core):], ws_after


def _run(ops: list[tuple], text: str, i: int, got: dict[str, Any]) -> int:
    """Reads ``ops`` from ``i``: the end, or -1 where the text is not the canonical form; what the
    slots and arguments hold goes to ``got``."""
    for op in ops:
        kind = op[0]
        if kind == LIT:
            _, core, ws_before, ws_after = op
            if ws_before:
                i = _WS(text, i).end()
            if not text.startswith(core, i):
                return -1
            i += len(core)
            if ws_after:
                i = _WS(text, i).end()
        elif kind == "slot":
            _, what, until, fused = op
            if fused is None:
                end = until.end_in(text, i)
                if end < 0:
                    return -1
                value, i = text[i:end], end
            else:
                m = until.search(text, i)
                if m is None or m.group() != fused[0]:
                    return -1  # (a fence, another marker, none: the general reader decides)
                hit, ws = m.start(), fused[1]
                end = hit - len(ws)
                if end < i or ws and not text.startswith(ws, end):
                    return -1
                value, i = text[i:end], hit + len(fused[0])
                if not text.startswith(fused[2], i):
                    return -1
                i += len(fused[2])
                if fused[3]:
                    i = _WS(text, i).end()
            if what == INDEX and not INDEX_TEXT.fullmatch(value):
                return -1
            got[what] = value
        elif kind == JSON:
            i = _WS(text, i).end()
            end = _json_end(text, i)
            if end < 0:
                return -1
            got[JSON], i = text[i:end], end
        else:
            i = _units(op[1], op[2], text, i, got)
            if i < 0:
                return -1
    return i


_WS = _JSON_WS.match


def _json_end(text: str, i: int) -> int:
    """The end of the JSON value at ``i`` (as :class:`~generator.peg.JsonValue` reads it whole),
    or -1."""
    if i >= len(text) or text[i] in "NI":
        return -1
    try:
        _, end = DECODER.raw_decode(text, i)
    except ValueError:
        return -1
    return -1 if number_cut(text, i, end) else end


def _units(plan: UnitsPlan, ops: list[tuple], text: str, i: int, got: dict[str, Any]) -> int:
    units: list[tuple[str, str]] = []
    got[UNITS] = units
    if plan.empty and text.startswith(plan.empty, i):
        return i + len(plan.empty)
    keys: set[str] = set()
    lead = plan.lead
    unit: dict[str, Any] = {}
    while text.startswith(lead, i):
        i = _run(ops, text, i + len(lead), unit)
        if i < 0:
            return -1
        key = unit[KEY].strip()
        if key in keys:
            return -1  # (a key written twice is the general parser's to report)
        keys.add(key)
        units.append((unit[KEY], unit[VALUE]))
    return i


class PlannedCall(Parser):
    """A call read by its plan when the whole output is at hand, else (or when the plan does
    not fit) by the general parser ``general`` (a ``tool_call`` capture with positions)."""

    def __init__(self, general: Parser, plan: CallPlan) -> None:
        self.general = general
        self.plan = plan

    def fast(self, inp: Input, pos: int) -> int:
        if inp.whole:
            end = self.plan.emit(inp, pos)
            if end >= 0:
                return end
        return self.general.fast(inp, pos)

    def run(self, inp: Input, pos: int) -> Run:  # (after ``fast``: the plan did not fit)
        return (yield from self.general.run(inp, pos))

    def first(self) -> tuple[str, ...] | None:
        return self.general.first()

    def nullable(self) -> bool:
        return self.general.nullable()


def planned(general: Parser, steps: Sequence[Step] | None) -> Parser:
    """``general``, read by the plan of ``steps`` where it fits (``steps`` None: no plan)."""
    return PlannedCall(general, CallPlan(steps)) if steps is not None else general


