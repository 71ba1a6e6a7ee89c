"""Repetition, guarded by the separator or by the item's first literal (:class:`Repeat`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from .combinators import _decision_pattern, guard_state, guards_of
from .runtime import (
    _WS_RUN,
    FAIL,
    NEED,
    NO_LIMIT,
    SLOW,
    Input,
    Parser,
    Run,
    mark,
    rollback,
    wake_for,
)


@dataclass(eq=False)
class Repeat(Parser):
    """``item (sep item)*``, at least ``min`` times.

    Whether another item follows is decided by the longest literal the input starts with:
    ``sep`` followed by one of the item's first literals (or the item's first literal, without
    a separator) continues; one of ``closers`` (what follows the repetition) stops. With an
    item that starts with no literal (``key=value``), the separator alone decides, and zero
    items are taken when a closer comes first. ``skip_ws``: whitespace before the next item
    does not count when deciding (the item skips it itself).
    """

    item: Parser
    sep: Parser | None = None
    min: int = 1
    max: int | None = None
    closers: tuple[str, ...] = ()
    skip_ws: bool = False

    def _continue_guards(self) -> tuple[str, ...] | None:
        first = self.item.first()
        item_lits = tuple(x for x in first if x) if first else ()
        if self.sep is None:
            return item_lits or None
        seps = guards_of(self.sep)
        if not item_lits:
            return seps
        # a separator alone continues only when it is not blank (a blank one may end the list:
        # "\n" before the end of the turn); the item may then come after more whitespace
        return tuple(s + f for s in seps for f in item_lits) + tuple(s for s in seps if s.strip())

    def _closers(self) -> tuple[str, ...]:
        """The closers, also behind a whitespace separator (``\n<|im_end|>`` stops a repetition
        whose separator is ``\n``)."""
        seps = guards_of(self.sep) if self.sep is not None else ()
        return self.closers + tuple(s + c for s in seps if s and not s.strip() for c in self.closers)

    @cached_property
    def _guards(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]:
        """(guards of the first item, guards of another item, closers)."""
        first = self.item.first()
        return (tuple(x for x in first if x) if first else None), self._continue_guards(), self._closers()

    @cached_property
    def _eof_patterns(self) -> dict[tuple[str, ...] | None, re.Pattern | None]:
        """The decision pattern per guards (see :func:`_decision_pattern`), filled as used."""
        return {}

    @cached_property
    def _more(self) -> Callable[[Input, int, int], tuple[int, int]] | None:
        """The item's :meth:`~Parser.fast_more` when the items it reads in a row need no
        decision between them: each starts, past the whitespace the decision skips, with a
        literal that continues the repetition, where no closer can match."""
        lead, (_, cont, closers) = self.item.lead(), self._guards
        if lead is None or not lead[0].strip() or self.sep is not None or not self.skip_ws or not cont:
            return None
        if not any(g and lead.startswith(g) for g in cont):
            return None
        if any(c.startswith(lead) or lead.startswith(c) for c in closers if c):
            return None
        return self.item.fast_more

    def _eof_pattern(self, cont: tuple[str, ...] | None, closers: tuple[str, ...]) -> re.Pattern | None:
        rx = self._eof_patterns.get(cont)
        if rx is None and cont not in self._eof_patterns:
            rx = self._eof_patterns[cont] = _decision_pattern(cont or (), closers)
        return rx

    def _next_at(self, inp: Input, pos: int) -> int:
        """Where the next item would start (past whitespace with ``skip_ws``)."""
        return _WS_RUN.match(inp.text, pos - inp.base).end() + inp.base if self.skip_ws else pos

    @staticmethod
    def _at_eof(inp: Input, at: int, cont: tuple[str, ...] | None, rx: re.Pattern | None) -> bool:
        """The decision with the whole input at hand (nothing pending: the longest guard at
        ``at`` decides, a closer on a tie)."""
        m = rx.match(inp.text, at - inp.base) if rx is not None else None
        if cont is None:
            return m is None and at < inp.end
        return m is not None and m.lastgroup[0] == "c"

    def _decision(self, inp: Input, pos: int, cont: tuple[str, ...] | None,
                  closers: tuple[str, ...]) -> bool | None:
        """True to parse another item, False to stop, None while more input may decide."""
        at = self._next_at(inp, pos)
        if self.skip_ws and at >= inp.end and not inp.eof:
            return None
        if inp.eof:
            return self._at_eof(inp, at, cont, self._eof_pattern(cont, closers))
        hit_c, pend_c = guard_state(inp, at, cont or ())
        hit_s, pend_s = guard_state(inp, at, closers)
        if (pend_c or pend_s) and not inp.eof and not (hit_c and not pend_s and not self.closers):
            inp.wake = wake_for(inp, at, (cont or ()) + closers)  # a longer guard may still match
            return None
        if cont is None:  # the item starts with no literal: anything but a closer is an item
            return hit_s is None and (at < inp.end)
        if hit_c is None:
            return False
        return hit_s is None or len(hit_c) > len(hit_s)

    def _decide(self, inp: Input, pos: int, cont: tuple[str, ...] | None) -> Run:
        closers = self._guards[2]
        while (go := self._decision(inp, pos, cont, closers)) is None:
            yield NEED
        return go

    def run(self, inp: Input, pos: int) -> Run:
        count = 0
        start_guards, cont, _ = self._guards
        if self.min == 0:
            go = yield from self._decide(inp, pos, start_guards)
            if not go:
                return pos
        while True:
            r = self.item.fast(inp, pos)
            pos = (yield from self.item.run(inp, pos)) if r == SLOW else r
            if pos == FAIL:
                return FAIL
            count += 1
            if self.max is not None and count >= self.max:
                return pos
            go = yield from self._decide(inp, pos, cont)
            if not go:
                return pos if count >= self.min else inp.fail(pos, "too few items")
            if self.sep is not None:
                r = self.sep.fast(inp, pos)
                pos = (yield from self.sep.run(inp, pos)) if r == SLOW else r
                if pos == FAIL:
                    return FAIL

    def fast(self, inp: Input, pos: int) -> int:
        if not inp.eof:
            return SLOW
        start_guards, cont, closers = self._guards
        if self.min == 0 and not self._decision(inp, pos, start_guards, closers):
            return pos
        m = mark(inp)
        count = 0
        # (``_decision`` at the end of input: ``_next_at`` and ``_at_eof`` inlined, once per item)
        item, sep, most, rx = self.item, self.sep, self.max, self._eof_pattern(cont, closers)
        text, base, end, ws = inp.text, inp.base, inp.end, _WS_RUN.match if self.skip_ws else None
        more = self._more if inp.whole else None
        while True:
            pos = item.fast(inp, pos)
            if pos < 0:
                return rollback(inp, m)
            count += 1
            if more is not None:  # (items read in a row: each would have been decided on)
                pos, n = more(inp, pos, most - count if most is not None else NO_LIMIT)
                count += n
            if most is not None and count >= most:
                return pos
            at = ws(text, pos - base).end() if ws is not None else pos - base
            hit = rx.match(text, at) if rx is not None else None
            if not (hit is None and at + base < end if cont is None else hit is not None and hit.lastgroup[0] == "c"):
                return pos if count >= self.min else rollback(inp, m)
            if sep is not None:
                pos = sep.fast(inp, pos)
                if pos < 0:
                    return rollback(inp, m)

    def first(self) -> tuple[str, ...] | None:
        f = self.item.first()
        if self.min == 0 and f is not None:
            return f + ("",)
        return f

    def nullable(self) -> bool:
        return self.min == 0
