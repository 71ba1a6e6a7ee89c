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
from .errors import AnalysisError
from .prober import Prober
from .structures import Caps

MAX_VALUES_PER_CONTROL = 4


@dataclass(frozen=True, slots=True)
class SettingRender:
    name: str
    kwargs: tuple[tuple[str, Any], ...]
    prompt: str  # the generation prompt under this setting


@dataclass(frozen=True, slots=True)
class Turns:
    base: tuple[dict[str, Any], ...]
    settings: tuple[SettingRender, ...]
    content_render: str   # base + [assistant(CONTENT)], no generation prompt
    message_start: int    # where the assistant message starts in content_render
    header: str           # the assistant message's opening that the default prompt shares
    before_content: str   # between header and CONTENT
    after_content: str    # after CONTENT, to the end

    @property
    def default(self) -> SettingRender:
        return self.settings[0]

    def setting(self, name: str) -> SettingRender | None:
        return next((s for s in self.settings if s.name == name), None)


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
                raise AnalysisError("the template renders no prompt for a single user message",
                                    template=prober.template.name, probe=f"generation_prompt[{name}]")
            continue
        settings.append(SettingRender(name, tuple(kwargs.items()), full[common_prefix_len(plain, full):]))
    nogen = prober.render("prompt[default]", base) or ""
    rendered = prober.render("assistant_content", base + [P.assistant(P.CONTENT)])
    if rendered is None or P.CONTENT not in rendered[common_prefix_len(nogen, rendered):]:
        raise AnalysisError("the template does not render an assistant message's content",
                            template=prober.template.name, probe="assistant_content")
    start = common_prefix_len(nogen, rendered)
    message = rendered[start:]
    header_len = common_prefix_len(message, settings[0].prompt, tokens=True)
    c = message.find(P.CONTENT, header_len)
    if c < 0:  # the content sits inside what the prompt shares (cannot happen for real text)
        header_len = 0
        c = message.find(P.CONTENT)
    return Turns(base=tuple(base), settings=tuple(settings), content_render=rendered, message_start=start,
                 header=message[:header_len], before_content=message[header_len:c],
                 after_content=message[c + len(P.CONTENT):])
