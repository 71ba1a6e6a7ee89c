"""The first of several literal markers in a text, found at the speed of ``str.find``.

A regular expression that is an alternation of literals (``<tool_call>|<|im_end|>|```)
makes Python's ``re`` try every alternative at every position: about 4 ns a character, against
0.3 ns when the pattern starts with a literal prefix, which ``re`` looks for with a fast loop in
C. The text before a marker is most of what a parser reads (reasoning, content), so the search
is grouped: the markers that start with the same character become one pattern with their
common prefix factored out (``<(?:tool_call>|\\|im_end\\|>)``), each group a fast search, and
the first hit of all groups is the answer. Groups are searched in a window that grows (a group
whose marker is rare would otherwise read to the end of the text for every search); the work
stays linear in the distance to the hit.

The answer is the match the plain alternation (longest marker first) gives, as a ``re.Match``.

Example::

    >>> find = marker_search(["<tool_call>", "<|im_end|>", "```"])
    >>> m = find("text ``` and <tool_call>", 0)
    >>> (m.start(), m.group())
    (5, '```')
    >>> find("no marker", 0) is None
    True
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Callable, Iterable

Search = Callable[..., "re.Match[str] | None"]  # (text, pos[, endpos]) -> the first match

SHORT = 512  # texts shorter than this are searched by the plain alternation (no set-up to pay)
_WINDOW = 2048  # the first window of starts the groups are searched in (it grows fourfold)


def _alternation(literals: Iterable[str]) -> str:
    """Longest first, so that at one position the longest literal matches."""
    return "|".join(re.escape(x) for x in sorted(literals, key=len, reverse=True))


def _group_pattern(literals: list[str]) -> re.Pattern[str]:
    """One pattern for literals with the same first character, their common prefix factored out
    (``re`` searches a literal prefix fast)."""
    prefix = os.path.commonprefix(literals)
    rest = [x[len(prefix):] for x in literals]
    if len(rest) == 1:
        return re.compile(re.escape(prefix))
    return re.compile(re.escape(prefix) + "(?:" + _alternation(rest) + ")")


def alternation_search(literals: Iterable[str]) -> Search:
    """The plain alternation's search (longest first): what :func:`marker_search` does on texts
    of up to :data:`SHORT` characters, without a Python call around it (streaming searches the
    few characters that arrived)."""
    return re.compile(_alternation(set(literals))).search


def marker_search(literals: Iterable[str]) -> Search:
    """``search(text, pos)``: the first of ``literals`` (non-empty) in ``text`` from ``pos``, the
    longest at that position, or None."""
    found = tuple(sorted(set(literals)))
    if not found or not all(found):
        raise ValueError("marker_search needs non-empty literals")
    return _search_of(found)


@lru_cache(maxsize=1024)  # (a grammar's fields share stops; a template's parsers share them all)
def _search_of(found: tuple[str, ...]) -> Search:
    groups: dict[str, list[str]] = {}
    for x in found:
        groups.setdefault(x[0], []).append(x)
    if len(groups) == 1:
        return _group_pattern(found).search
    plain = alternation_search(found)
    searches = [_group_pattern(g).search for g in groups.values()]
    maxlen = max(map(len, found))

    def search(text: str, pos: int = 0) -> re.Match[str] | None:
        n = len(text)
        if n - pos <= SHORT:
            return plain(text, pos)
        window = _WINDOW
        while True:
            stop = pos + window  # a match starting before ``stop`` fits in ``limit``: found
            limit = stop + maxlen
            if limit >= n:  # (the rest of the text: every match is whole)
                stop = limit = n
            best = None
            for group in searches:
                m = group(text, pos, limit)
                if m is not None and m.start() < stop:
                    # (a match starting later may be a shorter marker where a longer one was cut)
                    best, stop = m, m.start()
                    limit = stop + maxlen
            if best is not None or limit >= n:
                return best
            pos, window = stop, window * 4

    return search
