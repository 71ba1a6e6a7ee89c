"""Skeleton helpers: a rendered text cut into literal parts and slots, parts merged, rendered
and split."""

from __future__ import annotations

from ..structures import Part
from .context import _Fail


# --------------------------------------------------------------------------- parts helpers

def _slots(text: str, values: list[tuple[str, str]]) -> list[Part]:
    """Split ``text`` into literal parts and slots at each occurrence of the slot values."""
    parts: list[Part] = []
    i = 0
    while i < len(text):
        best = None
        for kind, val in values:
            if not val:
                continue
            j = text.find(val, i)
            if j >= 0 and (best is None or j < best[0]):
                best = (j, kind, val)
        if best is None:
            parts.append(Part("lit", text[i:]))
            break
        j, kind, val = best
        if j > i:
            parts.append(Part("lit", text[i:j]))
        parts.append(Part(kind))
        i = j + len(val)
    return _merge(parts)


def _merge(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    for p in parts:
        if p.kind == "lit" and not p.text:
            continue
        if p.kind == "lit" and out and out[-1].kind == "lit":
            out[-1] = Part("lit", out[-1].text + p.text)
        else:
            out.append(p)
    return out


def _render_parts(parts: list[Part], name: str, cid: str, index: int) -> list[tuple[Part, str]]:
    out = []
    for p in parts:
        if p.kind == "lit":
            out.append((p, p.text))
        elif p.kind == "name":
            out.append((p, name))
        elif p.kind == "id":
            out.append((p, cid))
        elif p.kind == "index":
            out.append((p, str(index + int(p.text or "0"))))
        else:
            out.append((p, ""))
    return out


def _split_at(parts: list[Part], name: str, cid: str, index: int, pos: int) -> tuple[list[Part], list[Part]]:
    """Split parts at character ``pos`` of their rendering (slots are never cut)."""
    left: list[Part] = []
    right: list[Part] = []
    i = 0
    for p, text in _render_parts(parts, name, cid, index):
        if i + len(text) <= pos:
            left.append(p)
        elif i >= pos:
            right.append(p)
        elif p.kind == "lit":
            left.append(Part("lit", p.text[:pos - i]))
            right.append(Part("lit", p.text[pos - i:]))
        else:
            raise _Fail(f"a section boundary falls inside a {p.kind} slot")
        i += len(text)
    return _merge(left), _merge(right)


def _text(parts: list[Part], name: str, cid: str, index: int) -> str:
    return "".join(t for _, t in _render_parts(parts, name, cid, index))
