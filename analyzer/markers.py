"""Generic marker shapes: how control markers look, independent of any model.

Templates write control markers in a handful of shapes: special tokens (``<|x|>``,
``<｜x｜>``, half-open ``<|x>``/``<x|>``), XML-like tags (``<x>``, ``</x>``, ``<x a="b">``,
``<ns:x>``), bracket tags (``[X]``, ``[/X]``). This module knows those shapes and nothing
about which model uses which marker. It tokenizes text so that diffs never cut a marker in
half, tells opening from closing markers, and derives one from the other.

Example::

    >>> [t for t in tokenize("a<think>\\nb") if t.strip()]
    ['a', '<think>', 'b']
    >>> closing_for("<think>")
    '</think>'
"""

from __future__ import annotations

import re
from functools import lru_cache

# One alternation, most specific shapes first. Kept as data so tests can read it.
MARKER_PATTERNS: tuple[str, ...] = (
    r"<\|[^<>|\n]{0,80}\|>",          # <|im_start|>, <|"|>
    r"<｜[^<>｜\n]{0,80}｜>",          # <｜Assistant｜> (full-width bars)
    r"<\|[^<>|\s]{1,80}>",            # <|turn>   (half-open start)
    r"<[^<>|\s/]{1,80}\|>",           # <turn|>   (half-open end)
    r"</?[A-Za-z_｜][^<>\n]{0,200}?/?>",  # <think>, </think>, <seed:think>, <invoke name="x">, <｜DSML｜invoke>
    r"\[/?[A-Za-z_][A-Za-z0-9_]{0,40}\]",  # [INST], [/INST], [TOOL_CALLS], [THINK]
)
_MARKER_RE = re.compile("|".join(f"(?:{p})" for p in MARKER_PATTERNS))
_TOKEN_RE = re.compile("|".join([f"(?:{p})" for p in MARKER_PATTERNS] + [r"\w+", r"\s", r"."]), re.S)

# Words that make a tag pair look like reasoning / a content wrapper (seed 001, methods 3-4).
# Reasoning: the serving API's own words for it (``reasoning_content``, ``reasoning_effort``,
# ``enable_thinking``, ``thinking`` blocks), never one template's; a marker named otherwise is
# found by what the template does with it (a history that drops text before it, a render that
# puts the reasoning inside it).
REASONING_WORDS = ("think", "reason")
CONTENT_WORDS = ("response", "answer", "output", "text", "content")


@lru_cache(maxsize=4096)
def tokenize(text: str) -> tuple[str, ...]:
    """Split ``text`` into markers, words, single whitespace characters and other characters."""
    return tuple(_TOKEN_RE.findall(text))


def is_marker(token: str) -> bool:
    return bool(_MARKER_RE.fullmatch(token))


def markers_in(text: str) -> list[str]:
    """The marker-shaped substrings of ``text``, in order."""
    return _MARKER_RE.findall(text)


def _inner(marker: str) -> tuple[str, str, str] | None:
    """Split a marker into (opening punctuation, name, closing punctuation)."""
    for left, right in (("<|", "|>"), ("<｜", "｜>"), ("<|", ">"), ("<", "|>"), ("[", "]"), ("<", ">")):
        if marker.startswith(left) and marker.endswith(right) and len(marker) > len(left) + len(right) - 1:
            return left, marker[len(left):len(marker) - len(right)], right
    return None


# Word pairs that turn an opening marker name into a closing one.
_OPEN_CLOSE_WORDS = (("START", "END"), ("BEGIN", "END"), ("OPEN", "CLOSE"), ("start", "end"),
                     ("begin", "end"), ("open", "close"), ("Start", "End"), ("Begin", "End"))
_WORD_RE = re.compile(r"(?<![A-Za-z])(START|BEGIN|OPEN|END|CLOSE|start|begin|open|end|close|Start|Begin|End|Open|Close)"
                      r"(?![A-Za-z])")


def _tag_name(name: str) -> str:
    """``invoke name="x"`` → ``invoke``; ``function=f`` → ``function``."""
    return re.split(r"[\s=]", name, maxsplit=1)[0]


def stem(marker: str) -> tuple[str, str] | None:
    """``(role, key)``: role is "open" or "close"; markers that pair share ``key``.

    ``<think>``/``</think>``, ``[THINK]``/``[/THINK]``, ``<|START_X|>``/``<|END_X|>``,
    ``<|turn>``/``<turn|>``, ``<|open|>``/``<|close|>`` and ``<x_begin>``/``<x_end>`` all pair.
    """
    if marker[:1] not in ("<", "["):  # no marker shape (most tokens asked about are words)
        return None
    parts = _inner(marker)
    if parts is None:
        return None
    left, name, right = parts
    if left == "<|" and right == ">":
        return "open", f"half:{name}"
    if left == "<" and right == "|>":
        return "close", f"half:{name}"
    bracket = "[]" if left == "[" else "<|>" if left in ("<|", "<｜") else "<>"
    if name.endswith("/"):
        return None  # self-closing (<br/>): neither opens nor closes a region
    if name.startswith("/"):
        return "close", f"{bracket}{name[1:]}"
    m = _WORD_RE.search(name)
    if m:
        word = m.group(1)
        role = "close" if word.upper() in ("END", "CLOSE") else "open"
        key = name[:m.start(1)] + "#" + name[m.end(1):]
        return role, f"{bracket}{key}"
    if bracket == "<>":
        return "open", f"{bracket}{_tag_name(name)}"
    return "open", f"{bracket}{name}"


def is_closing(marker: str) -> bool:
    """True for markers that close something: ``</x>``, ``[/X]``, ``<|END_X|>``, ``<x|>``."""
    st = stem(marker)
    return st is not None and st[0] == "close"


def is_opening(marker: str) -> bool:
    st = stem(marker)
    return st is not None and st[0] == "open"


def pairs(opening: str, closing: str) -> bool:
    """True when ``closing`` is the natural closer of ``opening``."""
    a, b = stem(opening), stem(closing)
    return a is not None and b is not None and a[0] == "open" and b[0] == "close" and a[1] == b[1]


def closing_for(opening: str) -> str | None:
    """The usual closing marker for ``opening``: ``<x>``→``</x>``, ``[X]``→``[/X]``,
    ``<|START_X|>``→``<|END_X|>``, ``<|x>``→``<x|>``."""
    parts = _inner(opening)
    if parts is None or not is_opening(opening):
        return None
    left, name, right = parts
    if left == "<|" and right == ">":
        return f"<{name}|>"
    m = _WORD_RE.search(name)
    if m:
        word = m.group(1)
        for o, c in _OPEN_CLOSE_WORDS:
            if word == o:
                return f"{left}{name[:m.start(1)]}{c}{name[m.end(1):]}{right}"
    if left == "<" and right == ">":
        return f"</{_tag_name(name)}>"
    return f"{left}/{name}{right}"


def opening_for(closing: str) -> str | None:
    """The usual opening marker for ``closing`` (inverse of :func:`closing_for`)."""
    parts = _inner(closing)
    if parts is None or not is_closing(closing):
        return None
    left, name, right = parts
    if left == "<" and right == "|>":
        return f"<|{name}>"
    if name.startswith("/"):
        return f"{left}{name[1:]}{right}"
    m = _WORD_RE.search(name)
    if m:
        word = m.group(1)
        for o, c in _OPEN_CLOSE_WORDS:
            if word == c:
                return f"{left}{name[:m.start(1)]}{o}{name[m.end(1):]}{right}"
    return None


def mirror_split(before: str, after: str) -> tuple[str, str] | None:
    """Find an opening sequence ending ``before`` that the start of ``after`` closes.

    Returns ``(opening, closing)`` as text (the opening with the whitespace that follows it
    in ``before``; the closing as written at the head of ``after``, without trailing
    whitespace), or None. Sequences may span tokens: ``<|open|>think<|sep|>`` is closed by
    ``<|close|>think<|sep|>``.
    """
    bt, at = tokenize(before), tokenize(after)
    ai = 0
    while ai < len(at) and at[ai].isspace():
        ai += 1
    if ai >= len(at) or not is_closing(at[ai]):
        return None
    end = len(bt)
    while end > 0 and bt[end - 1].isspace():
        end -= 1
    for j in range(end - 1, max(-1, end - 8), -1):
        if not pairs(bt[j], at[ai]):
            continue
        tail = bt[j + 1:end]
        if tuple(at[ai + 1:ai + 1 + len(tail)]) == tuple(tail):
            return "".join(bt[j:]), "".join(at[ai:ai + 1 + len(tail)])
        if not any(is_marker(t) for t in tail):
            # a name after the opener that the closer does not repeat: <|channel>thought\n ... <channel|>
            return "".join(bt[j:]), at[ai]
    return None


def mentions(marker: str, words: tuple[str, ...]) -> bool:
    low = marker.lower()
    return any(w in low for w in words)


def visible(text: str) -> str:
    """Whitespace made visible, for reports: ``'<think>\\n'`` → ``'<think>↵'``."""
    return (text.replace("\r", "␍").replace("\t", "⇥").replace("\n", "↵").replace(" ", "·")
            if text else "∅")
