"""A small resumable PEG runtime for parsing model output, whole or as it streams.

The package: :mod:`.runtime` (input, parser protocol, driver), :mod:`.text` (literals, markers,
:class:`Until`), :mod:`.combinators`, :mod:`.repeat` and :mod:`.json_value`.

Parsers are coroutines over one shared input buffer: when a parser needs text that has not
arrived yet it yields, and resumes when more is fed. The same grammar therefore parses a
complete output (feed everything, then finish) and a stream (feed chunks), and a stream never
re-parses what came before.

To keep streaming cheap and events final, choices are *guarded*: an alternative is chosen by
the literal its input starts with (waiting while a literal is still partially present), and
the choice is never undone. Grammars for model output are like that: markers decide.

Building blocks:

* :class:`Lit` / :class:`Marker`: a literal; a marker also takes the whitespace the template
  writes around it, when present.
* :class:`Seq`, :class:`Choice` (guarded), :func:`Opt`, :class:`Repeat` (guarded by the
  separator / the item's first literal).
* :class:`Until`: text up to the first of some markers (or the end), streamed as it arrives,
  holding back only what could still be the start of a marker.
* :class:`JsonValue`: one JSON value, scanned incrementally; its raw bytes are streamed.
* :class:`Capture`: tags a region: ``open``/``chunk``/``close`` events.
* :class:`OneOf`: one of several literals (e.g. the tool names), longest match.

Example::

    >>> g = Seq(Capture("a", Until([Marker("</a>")])), Marker("</a>"), Capture("b", Until([])))
    >>> run_all(g, "x</a>y")[1]
    [('open', 'a'), ('chunk', 'a', 'x'), ('close', 'a'), ('open', 'b'), ('chunk', 'b', 'y'), ('close', 'b')]
"""

from __future__ import annotations

from .runtime import (Driven, Event, FAIL, Input, NEED, NO_LIMIT, Parser, Run, SLOW, Session, _Fast, deviate,
    drive, mark, past_ws, rollback, run_all, skip_ws, wake_for)
from .text import Empty, Lit, Marker, Text, Until, Ws
from .combinators import (Ahead, Attempt, Capture, Check, Choice, Hooked, Lazy, Noted, OneOf, Opt, OptMarker,
    Seq, Valid, guard_state, guards_of)
from .repeat import Repeat
from .json_value import DECODER, JsonValue, SCAN, number_cut

__all__ = ["Ahead", "Attempt", "Capture", "Check", "Choice", "DECODER", "Driven", "Empty", "Event", "FAIL",
           "Hooked", "Input", "JsonValue", "Lazy", "Lit", "Marker", "NEED", "NO_LIMIT", "Noted", "OneOf",
           "Opt", "OptMarker", "Parser", "Repeat", "Run", "SCAN", "SLOW", "Seq", "Session", "Text", "Until",
           "Valid", "Ws", "_Fast", "deviate", "drive", "guard_state", "guards_of", "mark", "number_cut",
           "past_ws", "rollback", "run_all", "skip_ws", "wake_for"]
