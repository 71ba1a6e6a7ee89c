"""Compare renders: common prefixes and suffixes, at character or marker-token granularity.

Token granularity (see :mod:`chat_autoparser.analyzer.markers`) keeps a diff boundary from cutting a marker
in half: ``"<think>"`` against ``"<|START|>"`` share no prefix, although both start with ``<``.

Example::

    >>> common_prefix_len("a<think>b", "a<tool>b", tokens=True)
    1
    >>> split_around("x<t>NEEDLE</t>y", "NEEDLE")
    ('x<t>', '</t>y')
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from .markers import tokenize


def common_prefix_len(a: str, b: str, *, tokens: bool = False) -> int:
    """Length (in characters) of the common prefix of ``a`` and ``b``."""
    if not tokens:
        # binary search over slice comparisons: C-speed memcmp instead of a Python loop
        lo, hi = 0, min(len(a), len(b))
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo
    return _token_prefix_len(a, b)


@lru_cache(maxsize=256)
def _token_prefix_len(a: str, b: str) -> int:
    # the analysis asks this of the same two long prompts once per tool-call probe. No token
    # holds a newline but as itself, so a newline both texts share ends a token in both, and
    # the tokens before it are the same: only the line where they part is tokenized.
    start = a.rfind("\n", 0, common_prefix_len(a, b)) + 1
    size = start
    for x, y in zip(tokenize(a[start:]), tokenize(b[start:])):
        if x != y:
            break
        size += len(x)
    return size


def common_suffix_len(a: str, b: str, *, tokens: bool = False, limit: int | None = None) -> int:
    """Length of the common suffix; ``limit`` caps it (so it cannot overlap a known prefix)."""
    if not tokens:
        lo, hi = 0, min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
        la, lb = len(a), len(b)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
                lo = mid
            else:
                hi = mid - 1
        return lo
    # (as in _token_prefix_len: the tokens they share from the end all lie past the start of the
    # line where they part, and that start ends a token in each)
    common = common_suffix_len(a, b)
    ta, tb = tokenize(a[a.rfind("\n", 0, len(a) - common) + 1:]), tokenize(b[b.rfind("\n", 0, len(b) - common) + 1:])
    size = 0
    for x, y in zip(reversed(ta), reversed(tb)):
        if x != y or (limit is not None and size + len(x) > limit):
            break
        size += len(x)
    return size


def common_prefix(texts: Sequence[str], *, tokens: bool = False) -> str:
    if not texts:
        return ""
    n = len(texts[0])
    for t in texts[1:]:
        n = min(n, common_prefix_len(texts[0][:n], t, tokens=tokens))
    return texts[0][:n]


def common_suffix(texts: Sequence[str], *, tokens: bool = False) -> str:
    if not texts:
        return ""
    n = len(texts[0])
    for t in texts[1:]:
        n = min(n, common_suffix_len(texts[0][len(texts[0]) - n:], t, tokens=tokens))
    return texts[0][len(texts[0]) - n:] if n else ""


@dataclass(frozen=True, slots=True)
class Diff:
    """Where two texts differ: ``a[prefix:a_end]`` was replaced by ``b[prefix:b_end]``."""

    prefix: int
    a_end: int
    b_end: int

    def a_middle(self, a: str) -> str:
        return a[self.prefix:self.a_end]

    def b_middle(self, b: str) -> str:
        return b[self.prefix:self.b_end]


def diff(a: str, b: str, *, tokens: bool = True) -> Diff:
    """The single changed region between ``a`` and ``b`` (prefix and suffix do not overlap)."""
    p = common_prefix_len(a, b, tokens=tokens)
    s = common_suffix_len(a[p:], b[p:], tokens=tokens)
    return Diff(p, len(a) - s, len(b) - s)


def split_around(text: str, needle: str, *, last: bool = False) -> tuple[str, str] | None:
    """``(before, after)`` around one occurrence of ``needle`` (first, or last), or None."""
    i = text.rfind(needle) if last else text.find(needle)
    if i < 0:
        return None
    return text[:i], text[i + len(needle):]


def leading_ws(s: str) -> str:
    return s[:len(s) - len(s.lstrip())]


def trailing_ws(s: str) -> str:
    return s[len(s.rstrip()):]
