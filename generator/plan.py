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

    >>> from chat_autoparser.generator.peg import Marker, Until
    >>> name = Until([Marker(">")], to_end=False)
    >>> plan = CallPlan([lit_step("<call name=", False, True), (NAME, name), lit_step(">", True, False),
    ...                  (JSON, None), lit_step("</call>", False, False)])
    >>> plan.read('<call name=f>{"a": 1}</call>', 0)
    (28, 'f', None, '{"a": 1}')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from .peg import DECODER, Capture, Input, Parser, Until, number_cut

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
        # slots inside JSON strings: read only when written without escapes; the arguments a
        # JSON value that is not a string (a JSON-encoded string is the general reader's)
        self.json_strings = json_strings
        self.source, self._read = _reader(_compile(self.steps), json_strings)
        # the literal every call read starts with, past whitespace ("": none)
        self.lead = self.steps[0][1][0] if self.steps and self.steps[0][0] == LIT else ""

    def read(self, text: str, i: int) -> tuple[int, str, str | None, str | list[tuple[str, str]]] | None:
        """``(end, name, id, arguments)`` of the call at ``i`` of a complete ``text`` (arguments:
        the JSON text, or the ``(key, value)`` texts of tagged units), or None when the call is
        not written in the canonical form."""
        return self._read(text, i)

    def emit(self, inp: Input, pos: int, most: int = 1) -> tuple[int, int]:
        """Reads the calls in a row from ``pos`` of a whole input (at most ``most``; each
        written in the canonical form, after whitespace only), each into one condensed event
        (``whole_call``: start, end, name, id, arguments; see ``Assembler.handle``): where the
        last ends and how many were read (``(pos, 0)``: none)."""
        read, text, base, events = self._read, inp.text, inp.base, inp.events
        n = 0
        while n < most and (found := read(text, pos - base)) is not None:
            end, name, call_id, args = found
            end += base
            events.append(("whole_call", pos, end, name, call_id, args))
            pos = end
            n += 1
        if n:
            inp.chunks += n
            inp.chunk_pos = inp.region_end = inp.keep_from = pos
            if inp.soft_pins:
                inp.soft_pins.clear()
        return pos, n


def lit_step(text: str, raw_before: bool, raw_after: bool) -> Step:
    """A literal written as the template writes it, next to raw text (a name, a key, a value) on
    the sides given: there it takes only its own whitespace; next to other structure, any (as
    the general parser's :func:`~chat_autoparser.generator.skeleton.literal` does)."""
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


_WS = _JSON_WS.match


def _json_end(text: str, i: int) -> int:
    """The end of the JSON value at ``i`` (as :class:`~chat_autoparser.generator.peg.JsonValue` reads it whole),
    or -1."""
    if text.startswith("{", i):  # (the usual arguments: an object is never a number cut short)
        try:
            return DECODER.scan_once(text, i)[1]
        except (ValueError, StopIteration):
            return -1
    if i >= len(text) or text[i] in "NI":
        return -1
    try:
        _, end = DECODER.scan_once(text, i)
    except (ValueError, StopIteration):
        return -1
    return -1 if number_cut(text, i, end) else end


# The steps become the straight-line code of one function (``CallPlan.source``): a call is read
# in the hot path of one-shot parsing, once per call, and a loop over the steps costs as much as
# the reading. Only names the compiler makes up are written into the code; every value that
# comes from the template (literals, markers, readers) is passed in the function's namespace.

class _Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.after_ws = False  # the last line written skipped whitespace
        self.names: dict[str, Any] = {"_WS": _WS, "_WSCH": (" ", "\t", "\r", "\n"), "_json_end": _json_end,
                                      "_INDEX": INDEX_TEXT.fullmatch,
                                      "_PLAIN": _PLAIN.fullmatch}

    def value(self, v: Any) -> str:
        """The name of a value in the namespace."""
        name = f"v{len(self.names)}"
        self.names[name] = v
        return name

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)
        self.after_ws = False

    def skip_ws(self, depth: int) -> None:
        """Past any whitespace at ``i`` (nothing to write when the last step just did that)."""
        if not self.after_ws:
            self.line(depth, "if text.startswith(_WSCH, i):")
            self.line(depth + 1, "i = _WS(text, i).end()")
            self.after_ws = True

    def expect(self, depth: int, literal: str) -> None:
        """``literal`` at ``i`` (else no call), read."""
        if literal:
            self.line(depth, f"if not text.startswith({self.value(literal)}, i):")
            self.line(depth + 1, "return None")
            self.line(depth, f"i += {len(literal)}")


def _reader(ops: list[tuple], json_strings: bool) -> tuple[str, Any]:
    code = _Code()
    code.line(0, "def read(text, i):")
    code.line(1, "name = call_id = args = None")
    _steps(code, ops, 1)
    code.line(1, "if not name or not name.strip() or args is None:")
    code.line(2, "return None")
    if json_strings:
        code.line(1, "if not _PLAIN(name) or call_id is not None and not _PLAIN(call_id) or args.startswith('\"'):")
        code.line(2, "return None")
    code.line(1, "return i, name, call_id, args")
    source = "\n".join(code.lines) + "\n"
    exec(_compiled(source), code.names)
    return source, code.names["read"]


@lru_cache(maxsize=256)
def _compiled(source: str) -> Any:
    """The code of a plan's source (only made-up names in it: plans of one shape share it,
    within a template's parsers and across templates)."""
    return compile(source, "<call plan>", "exec")


_SLOT_VAR = {NAME: "name", ID: "call_id", INDEX: "index", KEY: "key", VALUE: "value"}


_NEAR = 256  # characters a slot's stop is looked for with ``str.find`` (names, ids, keys)


def _other_firsts(until: Until, core: str) -> str | None:
    """The first characters of the slot's other stops and fences, when none of them can match
    where ``core`` does (then the slot ends at the first ``core`` with none of them before it);
    else None (the reader's search decides)."""
    others = (set(until.cores) | until.fences) - {core}
    if any(o.startswith(core) or core.startswith(o) for o in others):
        return None
    return "".join(sorted({o[0] for o in others}))


def _find_stop(code: _Code, until: Until, core: str, d: int) -> None:
    """``h``: where the slot's text ends at ``core``, its first stop (else no call: a fence,
    another marker, none; the general reader decides). When no other stop or fence can match
    where ``core`` does, ``core`` is looked for with ``str.find`` near ``i``, and the text before
    it for the other markers' first characters; where one stands, the reader's search decides."""
    firsts = _other_firsts(until, core)
    if firsts is not None:
        code.line(d, f"h = text.find({code.value(core)}, i, i + {_NEAR})")
        test = " or ".join(["h < 0"] + [f"text.find({c!r}, i, h) >= 0" for c in firsts])
        code.line(d, f"if {test}:")
        d += 1
    code.line(d, f"m = {code.value(until.searcher)}(text, i)")
    code.line(d, f"if m is None or m.group() != {code.value(core)}:")
    code.line(d + 1, "return None  # (a fence, another marker, none: the general reader decides)")
    code.line(d, "h = m.start()")


def _check_index(code: _Code, what: str, d: int) -> None:
    if what == INDEX:
        code.line(d, "if not _INDEX(index):")
        code.line(d + 1, "return None")


# A run of literals and slots that end at a literal (a name and an index between markers) is
# also tried as one regular expression: one match reads the run for about the cost of two of its
# steps. Where it does not match, the steps read the run as above (the expression only takes
# what they would take: a slot's text up to the first ``core`` with no other marker's first
# character before it).

_WS_RX = "[ \t\n\r]*"  # (what ``_WS`` skips)
_INDEX_GROUP = "(" + INDEX_TEXT.pattern + ")"


def _slot_rx(what: str, until: Until, fused: tuple[str, str, str, bool] | None) -> str | None:
    """The expression of a fused slot up to its literal's end, or None when only the steps read it."""
    if fused is None:
        return None
    core, ws, rest, ws_after = fused
    firsts = _other_firsts(until, core)
    if firsts is None:
        return None
    if what == INDEX and not any(c.isspace() or c.isdigit() for c in firsts + core + ws):
        # (what ``_INDEX`` takes, with none of the markers' characters: the text up to the first
        # core, checked by the expression)
        text = _INDEX_GROUP
    elif len(core) == 1 or core[0] in firsts:  # the text cannot run past the core's first character:
        # its first occurrence is the core's (with the whitespace it takes before it), or no match
        text = "([^" + re.escape("".join(sorted(set(firsts + core[0])))) + "]*)"
    elif not ws:  # the first core with no other marker's first character before it (and no
        # core: not a later one where the literal's rest does not follow the first)
        text = "((?:(?!" + re.escape(core) + ")" + ("[^" + re.escape(firsts) + "]" if firsts else r"[\s\S]") + ")*)"
    else:  # (a later core with the whitespace before it is not what the steps read)
        return None
    return text + re.escape(ws + core + rest) + (_WS_RX if ws_after else "")


def _lit_rx(op: tuple, after_ws: bool) -> str:
    _, core, ws_before, ws_after = op
    return (_WS_RX if ws_before and not after_ws else "") + re.escape(core) + (_WS_RX if ws_after else "")


def _runs(ops: list[tuple]) -> list[tuple[list[tuple], str | None]]:
    """The ops in runs, each with its expression (None: read by steps only)."""
    runs: list[tuple[list[tuple], str | None]] = []
    run: list[tuple] = []
    parts: list[str] = []
    slots = 0

    def close() -> None:
        nonlocal run, parts, slots
        if run:
            runs.append((run, "".join(parts) if slots else None))
        run, parts, slots = [], [], 0

    for op in ops:
        if op[0] == LIT:
            parts.append(_lit_rx(op, bool(parts) and parts[-1].endswith(_WS_RX)))
            run.append(op)
        elif op[0] == "slot" and (rx := _slot_rx(op[1], op[2], op[3])) is not None:
            parts.append(rx)
            run.append(op)
            slots += 1
        else:
            close()
            runs.append(([op], None))
    close()
    return runs


def _steps(code: _Code, ops: list[tuple], d: int) -> None:
    for run, rx in _runs(ops):
        if rx is None:
            _step_by_step(code, run, d)
            continue
        names = [_SLOT_VAR[op[1]] for op in run if op[0] == "slot"]
        code.line(d, f"m = {code.value(re.compile(rx).match)}(text, i)")
        code.line(d, "if m is not None:")
        code.line(d + 1, f"{', '.join(names)}{',' if len(names) == 1 else ''} = m.groups()")
        if "index" in names and _INDEX_GROUP not in rx:  # (else the expression checked it)
            _check_index(code, INDEX, d + 1)
        code.line(d + 1, "i = m.end()")
        code.line(d, "else:")
        _step_by_step(code, run, d + 1)
        code.after_ws = rx.endswith(_WS_RX)


def _step_by_step(code: _Code, ops: list[tuple], d: int) -> None:
    for op in ops:
        kind = op[0]
        if kind == LIT:
            _, core, ws_before, ws_after = op
            if ws_before:
                code.skip_ws(d)
            code.expect(d, core)
            if ws_after:
                code.skip_ws(d)
        elif kind == "slot":
            _, what, until, fused = op
            var = _SLOT_VAR[what]
            if fused is None:
                code.line(d, f"e = {code.value(until.end_in)}(text, i)")
                code.line(d, "if e < 0:")
                code.line(d + 1, "return None")
                code.line(d, f"{var} = text[i:e]")
                _check_index(code, what, d)
                code.line(d, "i = e")
            else:
                core, ws, rest, ws_after = fused
                _find_stop(code, until, core, d)
                if ws:  # (the whitespace the marker takes before it)
                    code.line(d, f"e = h - {len(ws)}")
                    code.line(d, f"if e < i or not text.startswith({code.value(ws)}, e):")
                    code.line(d + 1, "return None")
                    code.line(d, f"{var} = text[i:e]")
                else:
                    code.line(d, f"{var} = text[i:h]")
                _check_index(code, what, d)
                code.line(d, f"i = h + {len(core)}")
                code.expect(d, rest)
                if ws_after:
                    code.skip_ws(d)
        elif kind == JSON:
            code.skip_ws(d)
            code.line(d, "e = _json_end(text, i)")
            code.line(d, "if e < 0:")
            code.line(d + 1, "return None")
            code.line(d, "args = text[i:e]")
            code.line(d, "i = e")
        else:  # tagged units, each read whole, no key twice (the general parser reports that)
            plan, unit_ops = op[1], op[2]
            code.line(d, "args = []")
            code.line(d, "keys = set()")
            body = d
            if plan.empty:
                code.line(d, f"if text.startswith({code.value(plan.empty)}, i):")
                code.line(d + 1, f"i += {len(plan.empty)}")
                code.line(d, "else:")
                body = d + 1
            code.line(body, f"while text.startswith({code.value(plan.lead)}, i):")
            code.line(body + 1, f"i += {len(plan.lead)}")
            _steps(code, unit_ops, body + 1)
            code.line(body + 1, "k = key.strip()")
            code.line(body + 1, "if k in keys:")
            code.line(body + 2, "return None")
            code.line(body + 1, "keys.add(k)")
            code.line(body + 1, "args.append((key, value))")


class PlannedCall(Capture):
    """A call (a ``tool_call`` capture with positions) read by its plan when the whole output is
    at hand, else (or when the plan does not fit) part by part as any capture reads (streaming
    resumes it with no extra layer)."""

    def __init__(self, p: Parser, plan: CallPlan) -> None:
        super().__init__("tool_call", p, where=True)
        self.plan = plan

    def fast(self, inp: Input, pos: int) -> int:
        if inp.whole:
            end, n = self.plan.emit(inp, pos)
            if n:
                return end
        return super().fast(inp, pos)

    def fast_more(self, inp: Input, pos: int, most: int) -> tuple[int, int]:
        if inp.whole:
            return self.plan.emit(inp, pos, most)
        return pos, 0

    def lead(self) -> str | None:
        return self.plan.lead or None


def planned(call: Parser, steps: Sequence[Step] | None) -> Parser:
    """A call's parts (``call``) as a ``tool_call`` capture, read by the plan of ``steps`` where
    it fits (``steps`` None: no plan)."""
    return PlannedCall(call, CallPlan(steps)) if steps is not None else Capture("tool_call", call, where=True)
