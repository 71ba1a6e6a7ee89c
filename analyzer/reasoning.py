"""Phase 1, reasoning: find the reasoning markers and the reasoning mode per setting.

Methods, most direct first (seed 001, extended):

1. **Reasoning in the message** (``reasoning_field`` / ``content_blocks``): render an assistant
   turn with reasoning (under each field name and block shape, as the last turn, as a past
   turn, and as a tool-call turn) and take the text around the reasoning needle.
2. **Thinking toggle**: diff the generation prompt across thinking settings; an empty block
   (``<think></think>``) or a lone closer appearing under one setting gives the markers,
   including the reverse case where *disabling* thinking adds the block.
3. **Prompt ending**: a generation prompt that ends with an opening marker that looks like
   reasoning opens a block the model must close.
4. **Adjacent pair**: an empty reasoning-like tag pair written anywhere in a prompt (e.g. in
   instructions: "think between <think></think>").

Markers found by 2-4 are confirmed, where possible, by **content split**: a past assistant
turn whose content is ``start + R + end + C`` renders without ``R`` when the template strips
reasoning from history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from . import probes as P
from .caps import tool_call_messages, tool_forms
from .diff import common_prefix_len, diff
from .markers import (CONTENT_WORDS, REASONING_WORDS, closing_for, is_closing, is_opening, mentions, mirror_split, opening_for,
                      pairs, tokenize)
from .prober import Prober
from .structures import Caps, ReasoningMode
from .template_info import BlockKind, TemplateInfo, content_block_kinds
from .turns import SettingRender, Turns, assistant_region


@dataclass(frozen=True, slots=True)
class Reasoning:
    start: str
    end: str
    source: str
    field: str = ""          # message key / shape the template reads reasoning from
    kept: str = ""           # "all", "last_turn", "tool_turns", "none"
    content_start: str = ""  # a content wrapper seen right after the reasoning end
    prefilled_start: bool = False  # the generation prompt writes the start marker
    settings_with_markers: tuple[str, ...] = ()  # for instructions-only markers
    probe_kwargs: tuple[tuple[str, Any], ...] = ()  # the thinking setting past reasoning renders under


def _reasoning_like(marker: str) -> bool:
    return mentions(marker, REASONING_WORDS)


def _take_closer(between: str) -> tuple[str, str]:
    """Split text after the reasoning into (end marker with its whitespace, the rest)."""
    toks = tokenize(between)
    for i, t in enumerate(toks):
        if is_closing(t):
            j = i + 1
            while j < len(toks) and toks[j].isspace():
                j += 1
            return "".join(toks[:j]), "".join(toks[j:])
    return between, ""


def _split_empty_pair(text: str) -> tuple[str, str] | None:
    """``<think>\\n\\n</think>\\n\\n`` → (``<think>\\n``, ``\\n</think>\\n\\n``): an opener and its
    closer with only whitespace between; the inner whitespace is shared out half and half."""
    toks = tokenize(text)
    for i, t in enumerate(toks):
        if not is_opening(t):
            continue
        j = i + 1
        while j < len(toks) and toks[j].isspace():
            j += 1
        if j < len(toks) and pairs(t, toks[j]):
            inner = "".join(toks[i + 1:j])
            half = (len(inner) + 1) // 2
            lead = "".join(toks[:i])
            lead = lead if lead.isspace() else ""
            return lead + t + inner[:half], inner[half:] + "".join(toks[j:])
    return None


# --------------------------------------------------------------------------- method 1

CONTEXTS = ("last", "history", "tool_turn")
# Keys of the probe's own message structure: seeing them in output means the template printed
# the structure (a Python/JSON repr of content blocks), not a reasoning block.
_PROBE_KEYS = ("'type'", '"type"', "'text'", '"text"', "'blocks'", '"blocks"')


def _contexts(caps: Caps) -> tuple[str, ...]:
    return CONTEXTS if caps.supports_tool_calls else CONTEXTS[:2]


def _conversation(ctx: str, fields: dict[str, Any], caps: Caps
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages before the assistant turn, the whole conversation, tools) for a context."""
    base = [P.user()]
    msg = {"role": "assistant", **fields}
    if ctx == "last":
        return base, base + [msg], None
    if ctx == "history":
        return base, base + [msg, P.user(P.USER2)], None
    call = tool_call_messages(tool_forms(caps), [(P.FN_A, {P.ARG_S: P.VAL_S}, P.ID_A)])
    return base, base + [{**msg, "tool_calls": call["tool_calls"]}, P.tool_result()], [P.tool_schema(P.FN_A)]


def _shapes_to_try(prober: Prober) -> list[tuple[str, dict[str, Any]]]:
    """Where to put reasoning in a message: the top-level fields whose names the template
    mentions at all (cheap filter), then the content blocks it writes (:func:`block_shapes`)."""
    source = prober.template.source
    words = {"reasoning_content": ("reasoning_content", "thinking", "reasoning"), "reasoning": ("reasoning",)}
    shapes = [(name, P.reasoning_fields(name, P.REASONING, P.CONTENT)) for name in P.REASONING_FIELDS
              if any(w in source for w in words[name])]
    return shapes + [(name, fields) for _, name, fields in block_shapes(prober)]


def block_shapes(prober: Prober) -> list[tuple[BlockKind, str, dict[str, Any]]]:
    """Content-block shapes that may carry reasoning, from the block kinds the template tests
    for, as (the reasoning block's kind, the shape's name, the message fields). In each
    container, the kinds whose block renders exactly as plain string content are answers (the
    first carries the answer); every other kind is tried for the reasoning, followed by an answer
    block (a container with no answer kind has nothing to set reasoning apart from)."""
    try:
        kinds = content_block_kinds(prober.template.source)
    except Exception:  # noqa: BLE001 - a template jinja2 cannot parse has no kinds to read
        return []
    if not kinds:
        return []
    def turn(content: Any) -> list[dict[str, Any]]:
        return [P.user(), {"role": "assistant", "content": content}]
    plain = prober.render("content_blocks[plain]", turn(P.CONTENT), record=False)
    if plain is None:
        return []
    answers = [k for k in kinds if prober.render(
        f"content_blocks[{k.type}]", turn(P.reasoning_fields(P.block_shape(k, None), P.CONTENT)["content"]),
        record=False) == plain]
    shapes = []
    for k in kinds:
        text = next((a for a in answers if a.container == k.container), None)
        if text is not None and k not in answers:
            name = P.block_shape(k, text)
            shapes.append((k, name, P.reasoning_fields(name, P.REASONING, P.CONTENT)))
    return shapes


@dataclass(frozen=True, slots=True)
class _Seen:
    header: str   # what the generation prompt shares with the rendered turn
    start: str    # between header and reasoning
    between: str  # between reasoning and content (or the tool call)
    pre: str      # between header and content when the turn has no reasoning
    has_content: bool
    lead: str = ""  # the rendering before the turn's region (a marker the prompt and the turn share ends it)


def _render_ctx(prober: Prober, caps: Caps, ctx: str, shape: str, fields: dict[str, Any],
                kwargs: dict[str, Any] | None = None) -> _Seen | None:
    kwargs = kwargs or {}
    tag = f"{ctx};{','.join(f'{k}={v}' for k, v in kwargs.items())}" if kwargs else ctx
    before, convo, tools = _conversation(ctx, fields, caps)
    out = prober.render(f"reasoning[{shape}@{tag}]", convo, tools=tools, **kwargs)
    if out is None:
        return None
    plain = prober.render(f"context_prompt[{tag}]", before, tools=tools, **kwargs) or ""
    r_abs = out.find(P.REASONING, common_prefix_len(plain, out))
    if r_abs < 0:
        return None
    full = prober.render(f"context_generation_prompt[{tag}]", before, tools=tools, add_generation_prompt=True,
                         **kwargs)
    gen = full[common_prefix_len(plain, full, tokens=True):] if full is not None else ""
    m0, header_len = assistant_region(out, plain, gen, anchor=P.USER, limit=r_abs)
    msg = out[m0:]
    r = r_abs - m0
    header_len = min(header_len, r)
    rest = msg[r + len(P.REASONING):]
    c = rest.find(P.CONTENT)
    between = rest[:c] if c >= 0 else _take_closer(rest)[0]
    if any(k in msg[header_len:r] + between for k in _PROBE_KEYS):
        return None
    _, no_reasoning, _ = _conversation(ctx, {"content": P.CONTENT}, caps)
    ref = prober.render(f"reasoning[none@{tag}]", no_reasoning, tools=tools, **kwargs) or ""
    c0 = ref.find(P.CONTENT, common_prefix_len(plain, ref))
    pre = ""
    if c0 >= 0:
        s0, h0 = assistant_region(ref, plain, gen, anchor=P.USER, limit=c0)
        pre = ref[s0 + h0:c0]
    return _Seen(header=msg[:header_len], start=msg[header_len:r], between=between, pre=pre, has_content=c >= 0,
                 lead=out[max(0, m0 - 200):m0])


def _split_after_reasoning(seen: _Seen, ctx: str) -> tuple[str, str]:
    """Split the text between reasoning and content into (end marker, content opener)."""
    between = seen.between
    has_content = seen.has_content and ctx != "tool_turn"  # calls may sit between the two
    mirrored = mirror_split(seen.start if seen.start.strip() else seen.header, between)
    if mirrored is not None:
        i = between.find(mirrored[1]) + len(mirrored[1])
        ws = len(between[i:]) - len(between[i:].lstrip())
        end, rest = between[:i + ws], between[i + ws:]
    elif has_content and seen.start + between == seen.pre:
        return between, ""  # the turn without reasoning renders the same block, empty
    elif has_content and seen.pre.strip() and between.endswith(seen.pre) and len(between) > len(seen.pre):
        return between[:-len(seen.pre)], seen.pre
    else:
        end, rest = _take_closer(between)
    if ctx == "tool_turn" and rest.strip():
        return end, ""  # what follows is the tool call, not part of the marker
    if rest.strip() and has_content:
        return end, rest
    return end + rest, ""


def _kwargs_options(turns: Turns) -> list[dict[str, Any]]:
    """Template kwargs to probe past reasoning under: none first, then each thinking setting
    (some templates render past reasoning only while thinking is on)."""
    out: list[dict[str, Any]] = [{}]
    for s in turns.settings:
        kw = dict(s.kwargs)
        if kw and kw not in out:
            out.append(kw)
    return out


def _from_message(prober: Prober, caps: Caps, turns: Turns) -> Reasoning | None:
    shapes = _shapes_to_try(prober)
    hit: tuple[str, dict[str, Any], str, _Seen, dict[str, Any]] | None = None
    for kwargs in _kwargs_options(turns) if shapes else []:
        for ctx in _contexts(caps):
            for shape, fields in shapes:
                seen = _render_ctx(prober, caps, ctx, shape, fields, kwargs)
                if seen is not None:
                    hit = (shape, fields, ctx, seen, kwargs)
                    break
            if hit:
                break
        if hit:
            break
    if hit is None:
        return None
    shape, fields, ctx, seen, kwargs = hit
    ctxs = {ctx} | {c for c in _contexts(caps)
                    if c != ctx and _render_ctx(prober, caps, c, shape, fields, kwargs)}
    kept = "all" if "history" in ctxs else "last_turn" if "last" in ctxs else "tool_turns"

    end, content_start = _split_after_reasoning(seen, ctx)
    if not end.strip() and not seen.start.strip():
        return None  # reasoning written with nothing around it: not separable from content
    start, prefilled = seen.start, False
    opener = mirror_split(seen.start, end) if seen.start.strip() else None
    if opener is not None and not seen.start[:seen.start.find(opener[0])].isspace() and \
            seen.start.find(opener[0]) > 0:
        start = opener[0]  # text before the opener is the header's, not the marker's
    if not seen.start.strip():
        # the opener the turn shares with the generation prompt: in the header, or (a prompt
        # that ends with it, the empty pair closed or not) just before the turn's region
        mirrored = mirror_split(seen.header, end) or (mirror_split(seen.lead, end) if not seen.header else None)
        if mirrored is not None:
            start, prefilled = mirrored[0], True
        else:
            start = ""  # implicit: the prompt opens reasoning without a marker
    source = "content_blocks" if shape.startswith("content_blocks") else "reasoning_field"
    return Reasoning(start=start, end=end, source=source, field=shape, kept=kept,
                     content_start=content_start, prefilled_start=prefilled, probe_kwargs=tuple(kwargs.items()))


# --------------------------------------------------------------------------- methods 2-4

def _from_toggle(turns: Turns) -> Reasoning | None:
    prompts = [s.prompt for s in turns.settings]
    for a in prompts:
        for b in prompts:
            if a == b:
                continue
            d = diff(a, b)
            extra = d.b_middle(b)
            if not extra.strip() or d.a_middle(a).strip():
                continue  # b must add text where a adds none
            pair = _split_empty_pair(extra)
            if pair and _reasoning_like(pair[0]):
                return Reasoning(start=pair[0], end=pair[1], source="thinking_toggle")
            mirrored = mirror_split(a[:d.prefix], extra)
            if mirrored and _reasoning_like(mirrored[0]):
                return Reasoning(start=mirrored[0], end=extra, source="thinking_toggle", prefilled_start=True)
    return None


def _from_prompt_end(turns: Turns) -> Reasoning | None:
    for s in turns.settings:
        toks = tokenize(s.prompt)
        i = len(toks)
        while i > 0 and toks[i - 1].isspace():
            i -= 1
        if i and is_opening(toks[i - 1]) and _reasoning_like(toks[i - 1]):
            closer = closing_for(toks[i - 1])
            if closer:
                return Reasoning(start="".join(toks[i - 1:]), end=closer, source="prompt_end", prefilled_start=True)
    return None


def adjacent_pairs(text: str, words: tuple[str, ...]) -> list[tuple[str, str]]:
    """Opening/closing marker pairs written next to each other (only whitespace between)."""
    toks = [t for t in tokenize(text)]
    out = []
    for i, t in enumerate(toks):
        if not is_opening(t) or not mentions(t, words):
            continue
        j = i + 1
        while j < len(toks) and toks[j].isspace():
            j += 1
        if j < len(toks) and pairs(t, toks[j]) and (t, toks[j]) not in out:
            out.append((t, toks[j]))
    return out


def _from_adjacent(prober: Prober, turns: Turns) -> Reasoning | None:
    hits: dict[tuple[str, str], list[str]] = {}
    for s in turns.settings:
        full = prober.render(f"generation_prompt[{s.name}]", list(turns.base), add_generation_prompt=True,
                             **dict(s.kwargs))
        for pair in adjacent_pairs(full or "", REASONING_WORDS):
            hits.setdefault(pair, []).append(s.name)
    if not hits:
        return None
    (start, end), names = next(iter(hits.items()))
    return Reasoning(start=start, end=end, source="adjacent_pair", settings_with_markers=tuple(names))


def closer_candidates(info: TemplateInfo | None) -> list[tuple[str, str]]:
    """Closing markers written as literals in the template source, with their openers (whether
    one closes reasoning is for the render to tell: :func:`content_split`), the first
    :data:`MAX_CLOSERS` in source order (each costs a render; the corpus has at most 18)."""
    if info is None:
        return []
    out: list[tuple[str, str]] = []
    for lit in info.literals:
        for tok in tokenize(lit):
            if is_closing(tok):
                opener = opening_for(tok)
                if opener and (opener, tok) not in out:
                    out.append((opener, tok))
                    if len(out) == MAX_CLOSERS:
                        return out
    return out


MAX_CLOSERS = 64


def content_split(prober: Prober, start: str, end: str) -> str:
    """How a past turn whose content embeds ``start R end C`` renders: "stripped" when the
    template removes the reasoning, "kept" when it keeps it, "" when it cannot tell.
    (The turn is followed by another assistant turn: some templates keep the last one.)"""
    text = f"{start}{P.REASONING}{end}{P.CONTENT}"
    hist = prober.render(f"content_split[{start.strip()}]", [P.user(), P.assistant(text), P.user(P.USER2),
                                                            P.assistant(P.CONTENT2)])
    if hist is None or P.CONTENT not in hist:
        return ""
    return "stripped" if P.REASONING not in hist else "kept"


# --------------------------------------------------------------------------- mode per setting

def mode_for(prompt: str, r: Reasoning | None, setting: str) -> ReasoningMode:
    """The reasoning mode a generation prompt leaves the model in."""
    if r is None or not (r.start.strip() or r.end.strip()):
        return ReasoningMode.NONE
    if r.settings_with_markers and setting not in r.settings_with_markers:
        return ReasoningMode.NONE  # markers only described in another setting's instructions
    tail = prompt.rstrip()
    if r.end.strip() and tail.endswith(r.end.strip()):
        return ReasoningMode.DISABLED
    if r.start.strip() and tail.endswith(r.start.strip()):
        return ReasoningMode.FORCED_OPEN
    if not r.start.strip():
        return ReasoningMode.FORCED_OPEN  # implicit: the end marker exists, the start never does
    return ReasoningMode.OPTIONAL


def detect_reasoning(prober: Prober, caps: Caps, turns: Turns, info: TemplateInfo | None) -> Reasoning | None:
    """Run the methods in order; the first that finds markers wins (and says so in ``source``)."""
    found = _from_message(prober, caps, turns)
    if found is not None:
        return found
    for method in (_from_toggle, _from_prompt_end):
        found = method(turns)
        if found is not None:
            split = content_split(prober, found.start.strip(), found.end.strip())
            return replace(found, kept="none" if split == "stripped" else found.kept)
    for start, end in closer_candidates(info):
        if content_split(prober, start, end) == "stripped":
            return Reasoning(start=start, end=end, source="content_split", kept="none")
    return _from_adjacent(prober, turns) or _from_instructed_answer(turns, info)


# "[BEGIN FINAL RESPONSE]": a bracketed phrase that starts the answer, named in instructions
_ANSWER_PHRASE = re.compile(r"\[(?:BEGIN|START)\s+[A-Z][A-Z ]{1,40}\]")


def _from_instructed_answer(turns: Turns, info: TemplateInfo | None) -> Reasoning | None:
    """Method 5, implicit reasoning told in words: the generation prompt ends in reasoning-like
    text with no marker (``Here are my reasoning steps:``) and the template names a bracketed
    phrase that starts the final answer: everything before that phrase is reasoning. (Where
    only a system prompt asks for reasoning, the past turns the template renders show plain
    answers: the output is not taken for reasoning.)"""
    last_line = turns.default.prompt.rstrip().split("\n")[-1]
    if not mentions(last_line, REASONING_WORDS) or any(is_opening(t) for t in tokenize(last_line)):
        return None
    for lit in info.literals if info is not None else ():
        m = _ANSWER_PHRASE.search(lit)
        if m is not None and mentions(m.group(0), CONTENT_WORDS):
            return Reasoning(start="", end=f"\n{m.group(0)}\n", source="instructions", prefilled_start=True)
    return None


def settings_modes(turns: Turns, r: Reasoning | None) -> list[tuple[SettingRender, ReasoningMode]]:
    return [(s, mode_for(s.prompt, r, s.name)) for s in turns.settings]
