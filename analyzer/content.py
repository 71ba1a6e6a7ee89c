"""Phase 1, content: is the answer wrapped in markers, always or only after reasoning?

Given the content-only turn (``header · before · CONTENT · after``) and, when the template has
reasoning, the text that followed the reasoning end, the wrapper is the opening sequence
before the content and the sequence that mirrors it after (``<|START_RESPONSE|>`` /
``<|END_RESPONSE|>``, ``<|open|>response<|sep|>`` / ``<|close|>response<|sep|>``). A wrapper
seen without reasoning is ALWAYS_WRAPPED; one seen only after reasoning, or only described
in thinking instructions, is WRAPPED_WITH_REASONING.
"""

from __future__ import annotations

from dataclasses import dataclass

from .markers import CONTENT_WORDS, is_marker, is_opening, mirror_split, tokenize
from .probes import NEEDLES
from .reasoning import Reasoning, adjacent_pairs
from .structures import ContentMode
from .turns import Turns


@dataclass(frozen=True, slots=True)
class Content:
    mode: ContentMode
    start: str
    end: str
    end_of_turn: str
    final_suffix: str = ""
    prefix: str = ""  # whitespace written between the generation prompt and the text


def _strip_empty_reasoning(before: str, r: Reasoning | None) -> str:
    """The part of ``before`` after an empty reasoning block the template wrote there."""
    if r is None or not r.end.strip():
        return before
    i = before.find(r.end.strip())
    if i < 0:
        return before
    rest = before[i + len(r.end.strip()):]
    return rest.lstrip() if not rest.strip() or rest != rest.lstrip() else rest


MAX_WRAPPER_TOKENS = 8


def plausible_wrapper(text: str) -> bool:
    """A content opener is a few marker-shaped tokens (with perhaps a channel name), not prose
    or conversation: guard and reward-model templates write whole instructions there."""
    toks = [t for t in tokenize(text) if not t.isspace()]
    return (0 < len(toks) <= MAX_WRAPPER_TOKENS and any(is_marker(t) for t in toks)
            and not any(n in text for n in NEEDLES))


def _recipient(before: str, prompt: str) -> bool:
    """A recipient line: the prompt ends with a delimiter (``>>>``) and the turn addresses its
    content with one word on its own line (``all\n``)."""
    import re
    return bool(re.fullmatch(r"\w+\n", before)) and bool(re.search(r"[^\w\s]$", prompt))


def detect_content(turns: Turns, r: Reasoning | None, thinking_prompt_full: str | None) -> Content:
    before = _strip_empty_reasoning(turns.before_content, r)
    after = turns.after_content
    start = before if before.strip() and (plausible_wrapper(before) or _recipient(before, turns.default.prompt)) \
        else ""
    mode = ContentMode.ALWAYS_WRAPPED if start else ContentMode.PLAIN
    if not start and r is not None and r.content_start.strip() and plausible_wrapper(r.content_start):
        start, mode = r.content_start, ContentMode.WRAPPED_WITH_REASONING
    end = ""
    if start:
        mirrored = mirror_split(start, after)
        if mirrored is not None:
            end = mirrored[1]
            lead = after[:len(after) - len(after.lstrip())]
            if end.strip() and not end[:1].isspace() and after[len(lead):].startswith(end):
                end = lead + end  # the whitespace the template writes before the closer is the closer's
            # the opening sequence is what mirrors, plus what precedes it in `before`
    elif thinking_prompt_full:
        # wrappers only described in instructions: "write your answer between <response></response>"
        pairs = adjacent_pairs(thinking_prompt_full, CONTENT_WORDS)
        if pairs:
            start, end = pairs[0]
            mode = ContentMode.WRAPPED_WITH_REASONING
    eot = _end_of_turn(after, turns.between_turns, end)
    last = _strip_closer(after, end)
    final = last if last.strip() and last.strip() != eot.strip() else ""
    prefix = before if before and not before.strip() else ""
    return Content(mode=mode, start=start, end=end, end_of_turn=eot, final_suffix=final, prefix=prefix)


def _strip_closer(text: str, end: str) -> str:
    if end and text.startswith(end):
        return text[len(end):]
    if end:
        toks = tokenize(text)
        k = next((i for i, t in enumerate(toks) if not t.isspace()), 0)
        rest = "".join(toks[k:])
        return rest[len(end):] if rest.startswith(end) else text
    return text


def _until_next_opening(text: str) -> str:
    """A turn's end stops where the next turn opens: at an opening marker after a closer."""
    from .markers import is_closing
    toks = tokenize(text)
    closed = False
    for i, t in enumerate(toks):
        if is_marker(t) and is_closing(t):
            closed = True
        elif closed and is_marker(t) and is_opening(t):
            return "".join(toks[:i])
    return text


def _end_of_turn(last: str, between: str | None, end: str) -> str:
    """The end of an assistant turn: what follows its content both when it is the last message
    and when a user turn follows (text written once at the end of the conversation, or a
    header always appended after it, is not part of the turn). A closer written only between
    turns (nothing follows the last message) is still the turn's end."""
    last = _strip_closer(last, end)
    if between is None:
        return last
    between = _strip_closer(between, end)
    from .diff import common_prefix_len
    common = _until_next_opening(last[:common_prefix_len(last, between, tokens=True)])
    if common.strip():
        return common
    # nothing after the last message: the closer is whatever precedes the user turn's opening
    toks = tokenize(between)
    opening = max((i for i, t in enumerate(toks) if is_marker(t) and is_opening(t)), default=None)
    closer = "".join(toks[:opening]) if opening is not None else ""
    return closer if closer.strip() else common
