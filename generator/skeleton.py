"""Calls read through the exact skeleton the analysis learned (literal parts, name, id, index,
arguments), leniently where models deviate from it.

A literal part is read piece by piece: its markers, and the text between them. Where a
marker stands next to other structure, any whitespace goes with it; next to a raw value (a
name, a key, a tagged value) only the template's own. Literals that close something (after the
last slot of a call or of an argument unit) may be missing: a raw value then also ends where
the next unit, the call's closer, the next call or the section end begins. A namespace the
template writes before the name (``functions.``) may be missing.

Example::

    >>> from chat_autoparser.analyzer.structures import FunctionFormat, Part, ToolCallStructure
    >>> from chat_autoparser.generator.peg import run_all
    >>> ts = ToolCallStructure(call_parts=(Part("lit", "<call>"), Part("name"), Part("lit", "</call>")))
    >>> [e for e in run_all(skeleton_call(ts, []), "<call> f</call>")[1] if e[0] == "chunk"]
    [('chunk', 'tool_name', ' f')]
"""

from __future__ import annotations

import re
from typing import Sequence

from chat_autoparser.analyzer.markers import is_marker, tokenize
from chat_autoparser.analyzer.structures import FunctionFormat, Part, ToolCallStructure

from .peg import (SLOW, Attempt, Capture, Choice, Driven, Empty, Input, JsonValue, Lit, Marker, Noted, Opt, Parser,
                  Repeat, Run, Seq, Until, Valid, Ws, deviate, skip_ws)
from .plan import ID, INDEX, INDEX_TEXT, JSON, KEY, NAME, UNITS, VALUE, Step, UnitsPlan, lit_step, planned
from .recovery import Recover
from .values import PYTHON, LiteralValue

RAW = frozenset(("name", "id", "key", "value", "index"))  # slots of raw text (their whitespace is theirs)
_NAMESPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.$")


def pieces(text: str) -> list[tuple[str, str, bool]]:
    """``text`` as (whitespace before, piece, is a marker): markers, and the text between them.
    Trailing whitespace is a last piece ``(ws, "", False)``.

    Example::

        >>> pieces("<a>\\n<function=")
        [('', '<a>', True), ('\\n', '<function=', False)]
    """
    out: list[tuple[str, str, bool]] = []
    ws, text_piece = "", ""
    for tok in tokenize(text):
        if is_marker(tok):
            if text_piece:
                out.append((ws, text_piece.rstrip(), False))
                ws = text_piece[len(text_piece.rstrip()):]
                text_piece = ""
            out.append((ws, tok, True))
            ws = ""
        elif tok.isspace() and not text_piece:
            ws += tok
        else:
            text_piece += tok
    if text_piece:
        out.append((ws, text_piece.rstrip(), False))
        ws = text_piece[len(text_piece.rstrip()):]
    if ws or not out:
        out.append((ws, "", False))
    return out


def first_piece(text: str) -> str:
    """The first marker or text of a literal (what a model must write to start it)."""
    return next((p for _, p, _ in pieces(text) if p), "")


def leads(text: str, before_name: bool = False) -> tuple[str, ...]:
    """Guards for a literal: its first piece, and the whole literal as the template writes it
    (the longer one tells it from other literals that start the same way); ``before_name``: the
    literal comes right before the function name, whose namespace may be missing."""
    first, whole = first_piece(text), text.strip()
    ns = _NAMESPACE.search(whole) if before_name else None
    short = whole[:ns.start()].strip() if ns is not None else ""
    first = short if ns is not None and first == whole else first
    return tuple(dict.fromkeys(x for x in (first, whole, short) if x))


class Literal(Seq):
    """A literal read piece by piece, starting with one of :func:`leads`."""

    def __init__(self, text: str, items: Sequence[Parser], before_name: bool = False) -> None:
        super().__init__(*items)
        self.text = text
        self.before_name = before_name

    def first(self) -> tuple[str, ...] | None:
        f = super().first()
        if f is None or "" in f:
            return f
        return tuple(dict.fromkeys(f + leads(self.text, self.before_name)))


def literal(text: str, *, raw_before: bool, raw_after: bool, optional: bool = False,
            namespace_optional: bool = False) -> Parser:
    """A literal part, read leniently (see the module docstring). ``optional``: a closing
    literal; each of its markers, with the text that follows it, is there whole or missing."""
    ps = pieces(text)
    seq: list[Parser] = []
    groups: list[tuple[list[Parser], str]] = []
    for i, (ws, piece, marker) in enumerate(ps):
        last = i == len(ps) - 1 or (i == len(ps) - 2 and not ps[-1][1])
        after = ps[i + 1][0] if last and i + 1 < len(ps) else ""
        if not piece:
            if i == 0 and raw_before or raw_after:
                seq.append(Lit(ws) if raw_before and raw_after else Marker("", ws))
            else:
                seq.append(Ws())
            continue
        loose_before = not (i == 0 and raw_before)
        loose_after = last and not raw_after
        m = Marker(piece, ws if not loose_before else "", after if last and raw_after else "",
                   loose_before, loose_after)
        ns = _NAMESPACE.search(piece) if namespace_optional and last and not marker else None
        if ns is not None:  # the namespace before the name may be missing
            if ns.start():
                seq.append(Marker(piece[:ns.start()], m.before, "", loose_before, False))
            seq.append(Noted(Opt(Marker(ns.group(0), "", m.after, False, loose_after), (ns.group(0),)),
                             f"the function name without its namespace {ns.group(0)!r}", missing=True))
        elif optional and (marker or not groups):
            groups.append(([m], piece))
        elif optional:
            groups[-1][0].append(m)
        else:
            seq.append(m)
        if last:
            break
    if groups:
        seq += [OptionalGroup(items, core) for items, core in groups]
    return Literal(text, seq, namespace_optional) if seq else Empty()


class OptionalGroup(Driven):
    """A closing marker (and the text after it) that is there whole or missing; missing where
    the output ends, it was cut off (an error event says so)."""

    def __init__(self, items: Sequence[Parser], core: str) -> None:
        self.attempt = Attempt(Seq(*items))
        self.core = core

    def run(self, inp: Input, pos: int) -> Run:
        r = self.attempt.fast(inp, pos)
        end = (yield from self.attempt.run(inp, pos)) if r == SLOW else r
        if end == pos:
            q = yield from skip_ws(inp, pos)
            if inp.eof and (q >= inp.end or self.core.startswith(inp.get(q, inp.end))):
                inp.events.append(("error", q, f"output ends before {self.core!r}"))
            else:
                deviate(inp, q, f"{self.core!r} missing")
        return end

    def first(self) -> tuple[str, ...]:
        return (self.core, "")

    def nullable(self) -> bool:
        return True


def stop_of(text: str, loose: bool = False) -> Marker | None:
    """The marker that ends a raw value before ``text`` (with the template's whitespace before
    it, or any whitespace when ``loose``); None for a literal of whitespace only."""
    ps = [p for p in pieces(text) if p[1]]
    if not ps:
        return None
    ws, piece, _ = ps[0]
    return Marker(piece, "", "", True) if loose else Marker(piece, ws)


def _typed_choice(part: Part, tag: str | None) -> Parser:
    texts = sorted({t for _, t in part.by_type if t}, key=len, reverse=True)
    alts = [((t,), Capture(tag, Lit(t)) if tag else Lit(t)) for t in texts]
    return Choice(alts, Empty())


class _Skeleton:
    """One skeleton (a call's parts, or an argument unit's), read part by part."""

    def __init__(self, parts: Sequence[Part], outer: Sequence[Marker], ts: ToolCallStructure | None = None) -> None:
        self.ts = ts  # the call's structure, when these are a call's parts (tagged arguments)
        self.parts = list(parts)
        self.outer = list(outer)  # what may follow the whole skeleton (any whitespace before it)
        slots = [i for i, p in enumerate(self.parts) if p.kind != "lit"]
        self.last_slot = slots[-1] if slots else -1

    def raw(self, i: int) -> bool:
        return 0 <= i < len(self.parts) and self.parts[i].kind in RAW

    def closer(self, i: int) -> bool:
        """Literal ``i`` closes the skeleton (it follows its last slot): it may be missing."""
        return i > self.last_slot >= 0

    def literal(self, i: int) -> Parser:
        p = self.parts[i]
        return literal(p.text, raw_before=self.raw(i - 1), raw_after=self.raw(i + 1), optional=self.closer(i),
                       namespace_optional=i + 1 < len(self.parts) and self.parts[i + 1].kind == "name")

    def stops(self, i: int, extra: Sequence[Marker] = (), openers: Sequence[Marker] = ()) -> list[Marker]:
        """What ends the raw slot ``i``: the next literal, and when that literal may be missing,
        whatever may follow it (``openers`` of the next unit, and markers of ``extra`` and of what
        follows the whole skeleton; all of ``extra`` when no literal follows)."""
        out: list[Marker] = []
        ws = ""  # whitespace-only literals on the way
        for j in range(i + 1, len(self.parts)):
            p = self.parts[j]
            if p.kind == "typed":
                return out + [Marker.of(ws + t) for _, t in p.by_type if t.strip()]
            if p.kind == "args" and self.ts is not None and self.ts.args_mode == "tagged":
                opener = first_piece(self.ts.arg_parts[0].text) if self.ts.arg_parts[0].kind == "lit" else ""
                out += [Marker(x, ws) for x in (opener, (self.ts.args_empty or "").strip()) if x]
                continue  # the arguments may be none: then whatever follows them
            if p.kind != "lit":  # another slot follows directly
                return out + list(extra) + list(openers) if out or not ws else [Marker(ws)]
            m = stop_of(p.text, loose=bool(out))
            if m is None:
                ws += p.text
                continue
            if ws and not out:
                m = Marker(m.core, ws + m.before)
            out.append(m)
            if not self.closer(j):
                return out
        later = list(extra) + self.outer
        if out:  # past a closer that may be missing: only markers end the value (not separators)
            later = [m for m in later if is_marker(m.core)]
        return out + list(openers) + later


def _written(text: str) -> bool:
    return bool(text.strip())


def _a_value(text: str) -> bool:
    """Text a value can be (not nothing, nor what ends one: ``key=)``, ``key=, ...``)."""
    text = text.lstrip()
    return bool(text) and text[0] not in ",)]}"


def python_raw(ts: ToolCallStructure) -> bool:
    """Python call syntax whose string values the template writes as they are (no format)."""
    fmt = dict(ts.value_formats).get("string")
    return ts.function_format == FunctionFormat.PYTHONIC and (fmt is None or fmt.raw_strings)


def quotes_apart(ts: ToolCallStructure) -> tuple[Part, ...]:
    """The argument parts, with the quotes the template writes around a value in Python call
    syntax (``key="value"``) as literals of their own: a model writes the value as a Python
    literal as often (``key='value'``, ``key=3``), and the key then ends at ``=`` all the same."""
    parts = list(ts.arg_parts)
    if not python_raw(ts):
        return tuple(parts)
    out: list[Part] = []
    for i, p in enumerate(parts):
        before = parts[i - 1] if i else None
        after = parts[i + 1] if i + 1 < len(parts) else None
        if p.kind == "value" and before is not None and after is not None and before.kind == after.kind == "lit" \
                and before.text[-1:] in ("'", '"') and after.text.startswith(before.text[-1:]):
            q = before.text[-1]
            out[-1] = Part("lit", out[-1].text[:-1])
            out += [Part("lit", q), p, Part("lit", q)]
            parts[i + 1] = Part("lit", after.text[1:])
            continue
        out.append(p)
    return tuple(x for x in out if x.kind != "lit" or x.text)


def own_quoted(parts: Sequence[Part]) -> set[int]:
    """The value parts between two quote literals of their own (as :func:`quotes_apart` sets
    them apart)."""
    return {i for i, p in enumerate(parts) if p.kind == "value" and 0 < i < len(parts) - 1
            and parts[i - 1].kind == parts[i + 1].kind == "lit" and parts[i - 1].text == parts[i + 1].text
            and parts[i + 1].text in ("'", '"')}


class TaggedArgs:
    """Arguments written as one unit per argument (``<parameter=k>v</parameter>``)."""

    def __init__(self, ts: ToolCallStructure, after: Sequence[Marker], closers: Sequence[str] = ()) -> None:
        self.ts = ts
        self.closers = tuple(closers) or ((after[0].core,) if after else ())  # what follows the arguments
        opener = first_piece(ts.arg_parts[0].text) if ts.arg_parts and ts.arg_parts[0].kind == "lit" else ""
        self.next_unit = [Marker(opener, "", "", True)] if opener else []
        # (a value that runs into what follows the arguments leaves its trailing whitespace to it)
        self.skeleton = _Skeleton(quotes_apart(ts), [m.loose(after=False) for m in after])
        self.after = list(after)

    def unit(self) -> tuple[Parser, list[Step] | None]:
        """One argument unit, and its plan (None when it has none: see :mod:`chat_autoparser.generator.plan`)."""
        sk, ts = self.skeleton, self.ts
        seq: list[Parser] = []
        steps: list[Step] | None = []
        seen_key = False
        sep = [m for m in [stop_of(ts.arg_separator, loose=True)] if m is not None]
        quoted = self._quoted_values()
        for i, p in enumerate(sk.parts):
            if p.kind == "lit":
                if i - 1 not in quoted and i + 1 not in quoted:  # (a value's own quote is read with it)
                    seq.append(sk.literal(i))
                step: Step | None = lit_step(p.text, sk.raw(i - 1), sk.raw(i + 1))
            elif p.kind == "key" and not seen_key:
                # a key the output ends in is kept (the call is shown already: its text is its own)
                key = Until(sk.stops(i, sep, self.next_unit), to_end=False, end_if=_written)
                seq.append(Capture("arg_key", key))
                step, seen_key = (KEY, key), True
            elif p.kind == "key":
                seq.append(Until(sk.stops(i, sep, self.next_unit), tag="", to_end=False))
                step = None
            elif p.kind == "typed":
                seq.append(_typed_choice(p, "arg_type"))
                step = None
            else:
                stops = sk.stops(i, sep, self.next_unit)
                value, raw = self.value(stops, sk.parts[i - 1] if i else None)
                if i in quoted:  # the template's quotes, else a Python literal (another quote, or none)
                    q = sk.parts[i + 1].text  # (the Python literal ends where the closing quote's literal would)
                    python = LiteralValue(PYTHON, stops=[m.core for m in sk.stops(i + 1, sep, self.next_unit)],
                                          own_quotes=())
                    literal_value = Valid(Capture("arg_literal", python), _a_value, "a value")
                    value = Choice([((q,), Seq(Lit(q), value, sk.literal(i + 1)))],
                                   Noted(literal_value, f"a value not in the template's {q} quotes"))
                seq.append(value)
                step = (VALUE, raw) if raw is not None else None
            steps = steps + [step] if steps is not None and step is not None else None
        return Seq(*seq), steps

    def _quoted_values(self) -> set[int]:
        """The value parts the template writes between two quotes of its own in Python call
        syntax (see :func:`quotes_apart`)."""
        return own_quoted(self.skeleton.parts) if python_raw(self.ts) else set()

    def value(self, stops: list[Marker], before: Part | None) -> tuple[Parser, Until | None]:
        """One argument's value: written in the template's value format, raw text up to what
        follows it, or (Python call syntax) a Python literal where one is written; and the
        reader of the raw text when that is all it is."""
        ts = self.ts
        cores = [m.core for m in stops]
        fmt = dict(ts.value_formats).get("string")
        python = ts.function_format == FunctionFormat.PYTHONIC
        if fmt is not None and not fmt.raw_strings:
            own = None if fmt.kind.startswith("python") else (fmt.str_open,)
            return Capture("arg_literal", LiteralValue(fmt, stops=cores, python_quotes=python, own_quotes=own)), None
        text = Until(stops, to_end=True)
        raw = Capture("arg_value", text)
        quoted_by_template = before is not None and before.kind == "lit" and before.text.rstrip()[-1:] in "'\""
        if python and not quoted_by_template:  # (the template writes strings unquoted)
            value = LiteralValue(PYTHON, stops=cores, own_quotes=())
            return Choice([(("'", '"', "[", "{"), Capture("arg_literal", value))], raw), None
        return raw, text

    def parser(self) -> tuple[Parser, Step | None]:
        """The arguments, and their plan."""
        ts = self.ts
        unit, steps = self.unit()
        sep: Parser | None = None
        if ts.arg_separator.strip():
            sep = literal(ts.arg_separator, raw_before=False, raw_after=ts.arg_parts[0].kind in RAW)
        body: Parser = Repeat(unit, sep, min=0, closers=self.closers, skip_ws=not ts.arg_separator.strip())
        if ts.args_empty:
            body = Choice([((ts.args_empty,), Lit(ts.args_empty))], body)
        parts = ts.arg_parts
        guards = [g for g in unit.first() or () if g]
        if steps is None or ts.arg_separator.strip() or parts[0].kind != "lit" or not parts[0].text.strip() \
                or parts[-1].kind != "lit" or [k for k, _ in steps].count(KEY) != 1 or \
                [k for k, _ in steps].count(VALUE) != 1 or \
                any(c.startswith(g) or g.startswith(c) for c in self.closers for g in guards):
            return body, None  # (e.g. a closer that a unit's opener may be read as: the general way decides)
        return body, (UNITS, UnitsPlan(steps, steps[0][1][0], ts.args_empty or ""))


def arguments(ts: ToolCallStructure, after: list[Marker], closers: Sequence[str] = ()) -> tuple[Parser, Step | None]:
    """The arguments of a call: tagged units, or one value (JSON, or the template's format);
    ``after`` ends a broken or raw value, ``closers`` (default: the first of ``after``) are what
    follows the arguments directly. With their plan (None: none, see :mod:`chat_autoparser.generator.plan`)."""
    if ts.args_mode == "tagged":
        return TaggedArgs(ts, after, closers).parser()
    fmt = ts.args_format
    if fmt.kind == "json":
        return Capture("tool_args", Recover(JsonValue(), after)), (JSON, None)
    return Capture("args_literal", Recover(LiteralValue(fmt), after)), None


def args_parser(ts: ToolCallStructure, after: list[Marker], closers: Sequence[str] = ()) -> Parser:
    """The arguments of a call (see :func:`arguments`)."""
    return arguments(ts, after, closers)[0]


def skeleton_call(ts: ToolCallStructure, outer: Sequence[Marker], names: frozenset[str] | None = None) -> Parser:
    """One call through its skeleton; ``outer``: what may follow the call (the next call's
    opener, the section's end, the end of the turn). A name that ends the output is taken
    when it is one of ``names`` (the output stopped right after it)."""
    known = (lambda text: text.strip() in names) if names else None
    sk = _Skeleton(ts.call_parts, outer, ts)
    parts = sk.parts
    # the markers a name, id or index never holds: a call missing one of its markers fails
    # there instead of reading the markers (and the next call) into its name
    fences = tuple(dict.fromkeys([t for p in parts if p.kind == "lit" for t in tokenize(p.text) if is_marker(t)]
                                 + [m.core for m in outer if is_marker(m.core)]))
    seq: list[Parser] = []
    steps: list[Step] | None = []  # the call's plan (None: it has none)
    # name <marker> id <marker>: the id and its marker may be missing (models write ids or not)
    optional_id = {i for i in range(1, len(parts) - 2)
                   if parts[i - 1].kind == "name" and parts[i].kind == "lit" and parts[i + 1].kind == "id"
                   and parts[i + 2].kind == "lit" and parts[i].text.strip() and parts[i + 2].text.strip()
                   and Marker.of(parts[i].text).core != Marker.of(parts[i + 2].text).core}
    skip = -1
    for i, p in enumerate(parts):
        if i == skip:
            continue
        stops = sk.stops(i)
        if i + 1 in optional_id:  # the name also ends where the arguments' marker begins
            stops = stops + [Marker.of(parts[i + 3].text)]
        step: Step | None = None
        if i in optional_id:
            m = Marker.of(p.text)
            seq.append(Opt(Seq(m, Capture("tool_id", Until(sk.stops(i + 1), to_end=False, fences=fences))),
                           tuple(g for g in m.first() if g)))
            skip = i + 1
        elif p.kind == "lit":
            seq.append(sk.literal(i))
            step = lit_step(p.text, sk.raw(i - 1), sk.raw(i + 1))
        elif p.kind == "name" and any(q.kind == "name" for q in parts[:i]):
            seq.append(Until(stops, tag="", to_end=False))  # the name again (a recipient header)
        elif p.kind == "name":
            name = Until(stops, to_end=False, end_if=known, fences=fences)
            seq.append(Capture("tool_name", name))
            step = (NAME, name)
        elif p.kind == "id":
            call_id = Until(stops, to_end=False, fences=fences)
            seq.append(Capture("tool_id", call_id))
            step = (ID, call_id)
        elif p.kind == "index":  # digits (an index never holds a name or other text)
            index = Until(stops, tag="", to_end=False, fences=fences)
            seq.append(Valid(index, INDEX_TEXT.fullmatch, "an index"))
            step = (INDEX, index)
        elif p.kind == "args":
            nxt = next((q.text for q in parts[i + 1:] if q.kind == "lit" and q.text.strip()), "")
            args, step = arguments(ts, stops, leads(nxt) if nxt else ())
            seq.append(args)
        elif p.kind == "typed":
            seq.append(_typed_choice(p, None))
        steps = steps + [step] if steps is not None and step is not None else None
    if steps is not None and not any(k == NAME for k, _ in steps):
        steps = None  # (a name written only in the id: the general way finds it)
    return planned(Seq(*seq), steps)
