"""The append-only bridge to the next turn, and per-token attribution of a render.

:func:`bridge_to_next_turn` continues a conversation in token ids without re-tokenizing any
earlier token (seed 000, "bridge"): it trims the completion to the token that closes the turn (or
appends the template's close when the output was truncated), re-emits what the template writes
after that close, and renders only the new messages and the generation prompt. Every piece comes
from rendering the template: the text after the answer is cut out of the template's rendering of
a conversation ending in that answer (the answer parsed from the completion with our parser), so
no model's format is written by hand.

:func:`render_with_attribution` renders a conversation, tokenizes it once (the ids a server
would feed) and says which message each token came from (-1 for the template's own text): an
assistant message owns what the model would have generated (after the generation prompt,
through its stop marker), other messages own their text fields. For loss masks.

Example::

    >>> import tokenizers
    >>> from tokenizers.models import WordLevel
    >>> from tokenizers.pre_tokenizers import Split
    >>> words = ["<|im_start|>", "<|im_end|>", "user", "assistant", "\\n", "Hi", "Hello", "[UNK]", "<think>", "</think>"]
    >>> t = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    >>> t.pre_tokenizer = Split("\\n", "isolated")
    >>> _ = t.add_special_tokens(words[:2] + words[8:])
    >>> ids, owners = render_with_attribution("templates/chatml-think.jinja",
    ...     [{"role": "user", "content": "Hi"}], tokenizer=t)
    >>> [(t.decode([i], skip_special_tokens=False), o) for i, o in zip(ids, owners)][:4]
    [('<|im_start|>', -1), ('user', -1), ('\\n', -1), ('Hi', 0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.analyzer.markers import markers_in

from ..params import generate_parser
from .conversation import Conversation, ConversationError, Message, stop_marker, template_of
from .tokens import TokenizerAdapter, load_tokenizer

STAND_IN_USER = {"role": "user", "content": "Hello."}  # the turn before the answer when no history is given


@dataclass(frozen=True)
class _Close:
    """Where the answer's turn ends in a rendering of the template, and the marker that ends it."""

    marker: str
    end: int  # in the rendering: just after the marker


def _close_markers(conv: Conversation, completion: str) -> list[str]:
    """Markers that may end an assistant turn: the model's stop marker, the end-of-turn markers the
    analysis found, and the last marker the completion itself ends with."""
    found = [stop_marker(conv.analysis)] + markers_in(conv.analysis.end_of_turn)
    tail = [m for m in markers_in(completion) if completion.rstrip().endswith(m)]
    return [m for i, m in enumerate(found + tail) if m and m not in (found + tail)[:i]]


def _answer_close(conv: Conversation, history: list[Message], answer: Message, new: list[Message],
                  kwargs: dict[str, Any], markers: list[str]) -> tuple[str, _Close]:
    """The template's rendering of ``history + answer + new`` with the generation prompt, and where
    the answer's turn closes in it: the last close marker before the new messages start (found
    by rendering the same history with another message after the answer)."""
    full = conv.render(history + [answer] + new, kwargs, generation_prompt=True)
    if full is None:
        raise ConversationError(conv.why("the template refuses the conversation with the new messages"))
    # the same messages, the first one's text changed: the renders part inside the new messages
    changed = [{**new[0], "content": "\u2063" + _text(new[0])}] + new[1:] if new else [{"role": "user", "content": "\u2063"}]
    other = conv.render(history + [answer] + changed, kwargs, generation_prompt=False)
    start = common_prefix_len(conv.render(history, kwargs, generation_prompt=False) or "", full)
    split = common_prefix_len(other, full) if other is not None else len(full)
    best: _Close | None = None
    for m in markers:
        at = full.rfind(m, start, split)
        if at >= 0 and (best is None or at + len(m) > best.end):
            best = _Close(m, at + len(m))
    if best is None:  # no close marker (the next turn's opener ends the turn): the answer's own render ends it
        upto = conv.render(history + [answer], kwargs, generation_prompt=False)
        if upto is None or not markers_in(full[start:split]) and not upto:
            raise ConversationError(f"cannot find where the template closes the assistant's turn in "
                                    f"{full[start:split]!r}")
        best = _Close("", common_prefix_len(upto, full))
    return full, best


def _text(m: Message) -> str:
    return "".join(_texts(m))


def _special_id(tok: TokenizerAdapter, marker: str) -> int | None:
    ids = tok.encode(marker)
    return ids[0] if len(ids) == 1 and tok.is_special(marker) else None


def bridge_to_next_turn(template: Any, prev_prompt_ids: Sequence[int], prev_completion_ids: Sequence[int],
                        new_messages: Sequence[Message], *, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None,
                        history: Sequence[Message] | None = None, analysis: Any = None,
                        **kwargs: Any) -> list[int]:
    """The next request's ids: ``prev_prompt_ids + prev_completion_ids`` (trimmed to the turn's close
    token, or with the template's close appended when the output was truncated), then what the
    template writes after the close, the new messages and the generation prompt, tokenized alone.

    ``new_messages``: tool results and user messages (an assistant message is refused: its tokens
    are the model's and must come from it); ``history``: the messages of the previous prompt, when
    the rendering of the new messages depends on them (default: one stand-in user message);
    ``kwargs``: the template's variables (``enable_thinking``, ...).

    Earlier ids are never re-tokenized: the result always starts with ``prev_prompt_ids`` and the
    kept completion ids.
    """
    if any(m.get("role") == "assistant" for m in new_messages):
        raise ConversationError("new_messages holds an assistant message; the bridge appends only what is not "
                                "the model's (tool results, user messages): assistant tokens must be sampled")
    loaded, analysis = template_of(template, analysis)
    tok = load_tokenizer(tokenizer)
    conv = Conversation(loaded, analysis, tools)
    prompt, completion = tok.decode(prev_prompt_ids), tok.decode(prev_completion_ids)
    markers = _close_markers(conv, completion)
    kept, closed_by = _trim(tok, list(prev_completion_ids), markers)
    if closed_by is None:  # a close written as text (not one token) ends the turn as well
        closed_by = next((m for m in markers if completion.rstrip().endswith(m)), None)
    params = generate_parser(analysis, tools=conv.tools, prompt=prompt, enable_thinking=kwargs.get("enable_thinking"))
    answer = conv.as_template_message(params.parser.parse(completion))
    before = list(history) if history is not None else [dict(STAND_IN_USER)]
    full, close = _answer_close(conv, before, answer, list(new_messages), kwargs,
                                [closed_by] if closed_by else markers)
    if closed_by is None and close.marker:
        kept += tok.encode(close.marker)
    return list(prev_prompt_ids) + kept + tok.encode(full[close.end:])


def _trim(tok: TokenizerAdapter, ids: list[int], markers: list[str]) -> tuple[list[int], str | None]:
    """The completion up to and including its last close token, and that marker (None: no close
    token, the output was truncated)."""
    closers = {i: m for m in markers if (i := _special_id(tok, m)) is not None}
    for k in range(len(ids) - 1, -1, -1):
        if ids[k] in closers:
            return ids[:k + 1], closers[ids[k]]
    return ids, None


# --------------------------------------------------------------------------- attribution

def render_with_attribution(template: Any, messages: Sequence[Message], *, tokenizer: Any,
                            tools: Sequence[dict[str, Any]] | None = None, add_generation_prompt: bool = False,
                            analysis: Any = None, **kwargs: Any) -> tuple[list[int], list[int]]:
    """``(ids, message_indices)``: the template's rendering tokenized once, and for each token the
    index of the message it comes from (-1: the template's own text). See the module docstring."""
    loaded, analysis = template_of(template, analysis)
    tok = load_tokenizer(tokenizer)
    conv = Conversation(loaded, analysis, tools)
    msgs = list(messages)
    full = conv.render(msgs, kwargs, generation_prompt=add_generation_prompt)
    if full is None:
        raise ConversationError(conv.why("the template refuses the conversation"))
    owner = [-1] * len(full)
    for k, m in enumerate(msgs):
        for a, b in _spans(conv, msgs, k, full, kwargs):
            owner[a:b] = [k] * (b - a)
    ids, starts = tok.encode_with_offsets(full)
    return ids, [owner[s] if s < len(owner) else -1 for s in starts]


def _spans(conv: Conversation, msgs: list[Message], k: int, full: str, kwargs: dict[str, Any]) -> list[tuple[int, int]]:
    """The character spans of ``full`` that message ``k`` owns."""
    before = conv.render(msgs[:k], kwargs, generation_prompt=False) if k else ""
    upto = conv.render(msgs[:k + 1], kwargs, generation_prompt=False)
    if before is None or upto is None:
        return []
    start, end = common_prefix_len(before, full), common_prefix_len(upto, full)
    m = msgs[k]
    if m.get("role") == "assistant":
        prompt = conv.render(msgs[:k], kwargs, generation_prompt=True) if k else None
        a = max(start, common_prefix_len(prompt, full)) if prompt is not None else start
        stop = stop_marker(conv.analysis)
        close = full.rfind(stop, a, end) if stop else -1
        return [(a, close + len(stop) if close >= 0 else end)]
    spans = []
    at = start
    for text in _texts(m):
        i = full.find(text, at, end)
        if i >= 0:
            spans.append((i, i + len(text)))
            at = i + len(text)
    return spans


def _texts(m: Message) -> list[str]:
    content = m.get("content")
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [p.get("text") for p in content if isinstance(p, dict) and p.get("text")]
    return []


__all__ = ["bridge_to_next_turn", "render_with_attribution"]
