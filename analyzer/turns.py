"""Turn structure: generation prompts per thinking setting, the assistant header, end of turn.

The generation prompt is what ``add_generation_prompt=True`` adds to a conversation. It
depends on the thinking controls the template reads, so it is rendered once per setting
(``default``, ``enable_thinking=true``/``false``, and any other reasoning-like variable the
template reads, with the values it compares that variable to).

The assistant header is the part of a rendered assistant message that the generation prompt
also writes; what follows it is what the model generates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import probes as P
from .caps import _info
from .diff import common_prefix_len
from .markers import is_closing, is_marker, tokenize
from ..errors import AnalysisError
from .prober import Prober
from .structures import Caps

MAX_VALUES_PER_CONTROL = 4


@dataclass(frozen=True, slots=True)
class SettingRender:
    name: str
    kwargs: tuple[tuple[str, Any], ...]
    prompt: str  # the generation prompt under this setting
    prompt_tools: str | None = None  # the same when the request has tools (None: not rendered)


@dataclass(frozen=True, slots=True)
class Turns:
    base: tuple[dict[str, Any], ...]
    settings: tuple[SettingRender, ...]
    content_render: str   # base + [assistant(CONTENT)], no generation prompt
    message_start: int    # where the assistant message starts in content_render
    header: str           # the assistant message's opening that the default prompt shares
    before_content: str   # between header and CONTENT
    after_content: str    # after CONTENT, to the end (the assistant turn is the last message)
    between_turns: str | None = None  # after CONTENT when another user turn follows, up to it

    @property
    def default(self) -> SettingRender:
        return self.settings[0]

    def setting(self, name: str) -> SettingRender | None:
        return next((s for s in self.settings if s.name == name), None)


def assistant_region(rendered: str, nogen: str, gen_prompt: str, *, anchor: str, limit: int) -> tuple[int, int]:
    """Where the assistant turn starts in ``rendered``, and how much of it the generation
    prompt also writes: ``(start, header_len)``.

    The turn is found by the generation prompt's text (its longest prefix that occurs first
    after the last ``anchor`` needle and before ``limit``), not by the common prefix with the bare prompt:
    some templates rewrite the last user turn when it is no longer last.
    """
    after = rendered.rfind(anchor, 0, limit)
    after = after + len(anchor) if after >= 0 else 0
    bounds, pos = [], 0
    for tok in tokenize(gen_prompt):  # (a prefix ends where a token does: "<|im" is not "<|im_end|>")
        pos += len(tok)
        bounds.append(pos)
    for k in reversed(bounds):
        i = rendered.find(gen_prompt[:k], after, limit)
        if i >= 0 and (k == len(gen_prompt) or k >= 4 or k == len(gen_prompt.strip())):
            return i, common_prefix_len(rendered[i:limit], gen_prompt, tokens=True)
    start = max(common_prefix_len(nogen, rendered), after)
    if start == after and anchor in nogen:  # what the prompt writes after the user's text closes the user turn
        own = nogen[nogen.rfind(anchor) + len(anchor):]
        start += common_prefix_len(rendered[start:limit], own, tokens=True)
    return min(start, limit), 0


def setting_candidates(prober: Prober, caps: Caps) -> list[tuple[str, dict[str, Any]]]:
    """(name, kwargs) for every thinking setting worth rendering."""
    out: list[tuple[str, dict[str, Any]]] = [("default", {}), ("enable_thinking=true", {"enable_thinking": True}),
                                             ("enable_thinking=false", {"enable_thinking": False})]
    info = _info(prober)
    for var in caps.thinking_controls:
        if var == "enable_thinking":
            continue
        values: tuple[Any, ...] = info.constants_for(var) if info is not None else ()
        for v in (values[:MAX_VALUES_PER_CONTROL] or (True, False)):
            out.append((f"{var}={json.dumps(v)}", {var: v}))
    return out


def probe_turns(prober: Prober, caps: Caps) -> Turns:
    """Render the generation prompt under each setting and a content-only assistant turn."""
    base = [P.user()]
    settings = []
    for name, kwargs in setting_candidates(prober, caps):
        full = prober.render(f"generation_prompt[{name}]", base, add_generation_prompt=True, **kwargs)
        plain = prober.render(f"prompt[{name}]", base, **kwargs)
        if full is None or plain is None:
            if name == "default":
                probe = f"generation_prompt[{name}]" if full is None else f"prompt[{name}]"
                why = prober.failures.get(probe)
                raise AnalysisError("the template renders no prompt for a single user message"
                                    + (f" ({why.kind}: {why.error})" if why else ""),
                                    template=prober.template.name, probe=probe)
            continue
        prompt = full[common_prefix_len(plain, full, tokens=True):] or _always_written_header(full, _answered(prober))
        settings.append(SettingRender(name, tuple(kwargs.items()), prompt, _tools_prompt(prober, caps, name, kwargs)))
    nogen = prober.render("prompt[default]", base) or ""
    rendered = _answered(prober)
    if rendered is None or P.CONTENT not in rendered[common_prefix_len(nogen, rendered):]:
        why = prober.failures.get("assistant_content")
        detail = f" ({why.kind}: {why.error})" if why else " (the content needle never appears in the output)"
        raise AnalysisError("the template does not render an assistant message's content" + detail,
                            template=prober.template.name, probe="assistant_content")
    c_abs = rendered.rfind(P.CONTENT)
    start, header_len = assistant_region(rendered, nogen, settings[0].prompt, anchor=P.USER, limit=c_abs)
    message = rendered[start:]
    c = c_abs - start
    return Turns(base=tuple(base), settings=tuple(settings), content_render=rendered, message_start=start,
                 header=message[:header_len], before_content=message[header_len:c],
                 after_content=message[c + len(P.CONTENT):],
                 between_turns=_between_turns(prober, base, nogen))


def _answered(prober: Prober) -> str | None:
    """The conversation with the assistant's answer (a user message, then CONTENT)."""
    return prober.render("assistant_content", [P.user(), P.assistant(P.CONTENT)])


def _tools_prompt(prober: Prober, caps: Caps, name: str, kwargs: dict[str, Any]) -> str | None:
    """The generation prompt of a request with tools (some templates open or close reasoning
    only then); None when the template takes no tools or always gets them."""
    if not caps.supports_tools or caps.requires_tools:
        return None
    tools = [P.tool_schema(P.FN_A)]
    full = prober.render(f"generation_prompt_tools[{name}]", [P.user()], tools=tools, add_generation_prompt=True,
                         **kwargs)
    plain = prober.render(f"prompt_tools[{name}]", [P.user()], tools=tools, **kwargs)
    if full is None or plain is None:
        return None
    return full[common_prefix_len(plain, full, tokens=True):] or _always_written_header(full, _answered(prober))


def _always_written_header(rendered: str, answered: str | None) -> str:
    """The assistant header a template writes after every conversation, whatever
    ``add_generation_prompt`` says (its generation prompt is then empty): the text after the last
    user message from its first marker that closes nothing on, when an answered conversation
    (``answered``) opens the assistant's turn with that marker too. "" when there is none.

    Example::

        >>> _always_written_header("<|user|>Userq7needle<|end|><|bot|><|think|><|/think|>",
        ...                        "<|user|>Userq7needle<|end|><|bot|>Contentq7needle<|end|>")
        '<|bot|><|think|><|/think|>'
    """
    if answered is None:
        return ""
    u, a = rendered.rfind(P.USER), answered.rfind(P.USER)
    c = answered.find(P.CONTENT, a) if a >= 0 else -1
    if u < 0 or c < 0:
        return ""
    # the marker that ends a turn (it follows the answer too) belongs to the user's turn
    turn_end = next((t for t in tokenize(answered[c + len(P.CONTENT):]) if is_marker(t)), "")
    tail = rendered[u + len(P.USER):]
    pos = 0
    for tok in tokenize(tail):
        if is_marker(tok) and not is_closing(tok) and tok != turn_end:
            return tail[pos:] if tok in answered[a:c] else ""
        pos += len(tok)
    return ""


def _between_turns(prober: Prober, base: list[dict[str, Any]], nogen: str) -> str | None:
    """What the template writes after an assistant turn's content when a user turn follows, up
    to the user's text (the turn's closer, then the user turn's opening)."""
    mid = prober.render("assistant_content:between", base + [P.assistant(P.CONTENT), P.user(P.USER2)])
    if mid is None:
        return None
    c, u = mid.rfind(P.CONTENT), mid.rfind(P.USER2)
    if c < 0 or u < c:
        return None
    return mid[c + len(P.CONTENT):u]
