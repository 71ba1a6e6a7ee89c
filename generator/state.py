"""Where the model's output starts: the thinking setting a request runs under, or what the real
prompt says.

Without the prompt, a request's setting decides: ``enable_thinking=None`` is the template's own
default (rendering with no kwargs), ``True``/``False`` the setting that lets the model reason or
not. With the prompt the server rendered (all of it or its tail), its end decides, as
transformers' ``parse_response(prefix=)`` and llama.cpp's forced-open detection do: reasoning
opened, reasoning closed, content opened, and a marker cut at the very end (the output
completes it).

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> start_state(a, prompt="<|im_start|>assistant\\n<think>\\n").mode.value
    'REASONING_FORCED_OPEN'
    >>> start_state(a).mode.value
    'REASONING_OPTIONAL'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from chat_autoparser.analyzer.structures import ReasoningMode, TemplateAnalysis, ThinkingSetting


@dataclass(frozen=True)
class StartState:
    """How the output starts, and why."""

    mode: ReasoningMode
    open_content: bool = False  # the prompt opened a content wrapper: the output starts inside it
    source: str = "setting:default"  # "prompt", or the setting it comes from ("setting:<name>")
    template_kwargs: dict[str, Any] = field(default_factory=dict)  # what to render the prompt with
    # the prompt ends with the start of a marker: the output starts with the rest of it
    # (``completion``) or not; the state when it does
    completion: str = ""
    completed: "StartState | None" = None

    def to_dict(self) -> dict[str, Any]:
        out = {"reasoning_mode": self.mode.value, "open_content": self.open_content, "source": self.source,
               "template_kwargs": dict(self.template_kwargs)}
        if self.completed is not None:
            out["completion"] = self.completion
            out["completed"] = self.completed.to_dict()
        return out


def thinking_setting(analysis: TemplateAnalysis, enable_thinking: bool | None) -> ThinkingSetting | None:
    """The analysis' thinking setting for a request: None → the template's default (no kwargs);
    on → the setting the analysis found to let the model reason; off → ``enable_thinking=false``
    if the template honours it, else another control's off value (``reasoning=false``,
    ``reasoning_effort="none"``)."""
    settings = list(analysis.thinking_settings)
    if not settings:
        return None
    if enable_thinking is None:
        return analysis.setting("default") or settings[0]
    if enable_thinking:
        on = [x for x in settings if x.generation_prompt == analysis.generation_prompt_thinking]
        return on[0] if on else (analysis.setting("enable_thinking=true") or settings[0])
    off = analysis.setting("enable_thinking=false")
    quiet = (ReasoningMode.DISABLED, ReasoningMode.NONE)
    if off is not None and off.reasoning_mode in quiet:
        return off
    return next((x for x in settings if x.reasoning_mode in quiet), off or settings[0])


def _setting_state(analysis: TemplateAnalysis, enable_thinking: bool | None, with_tools: bool) -> StartState:
    s = thinking_setting(analysis, enable_thinking)
    if s is None:
        return StartState(analysis.content_structure.reasoning_mode)
    return StartState(s.mode_for(with_tools), source=f"setting:{s.name}" + (" with tools" if with_tools else ""),
                      template_kwargs=s.kwargs_dict)


def _cut_marker(tail: str, markers: list[str]) -> str:
    """The longest proper prefix of one of ``markers`` that ``tail`` ends with ("" if none)."""
    best = ""
    for m in markers:
        for k in range(len(m) - 1, 0, -1):
            if k > len(best) and tail.endswith(m[:k]):
                best = m[:k]
                break
    return best


def start_state(analysis: TemplateAnalysis, *, enable_thinking: bool | None = None,
                prompt: str | None = None, with_tools: bool = False) -> StartState:
    """The start state of the output for a request (see the module docstring); ``with_tools``:
    the request has tools (some templates write another generation prompt then)."""
    if prompt is None:
        return _setting_state(analysis, enable_thinking, with_tools)
    cs = analysis.content_structure
    markers = [m for m in (cs.reasoning_start.strip(), cs.reasoning_end.strip(), cs.content_start.strip()) if m]
    lead = _cut_marker(prompt, markers)
    if not lead:
        return _prompt_state(analysis, prompt, enable_thinking)
    full = next(m for m in markers if m.startswith(lead))
    return replace(_prompt_state(analysis, prompt[:-len(lead)], enable_thinking), completion=full[len(lead):],
                   completed=_prompt_state(analysis, prompt[:-len(lead)] + full, enable_thinking))


def _prompt_state(analysis: TemplateAnalysis, prompt: str, enable_thinking: bool | None) -> StartState:
    cs = analysis.content_structure
    start, end = cs.reasoning_start.strip(), cs.reasoning_end.strip()
    content = cs.content_start.strip()
    tail = prompt.rstrip()
    setting = _setting_state(analysis, enable_thinking, False)
    matches = [s for s in analysis.thinking_settings if s.generation_prompt.strip() and
               tail.endswith(s.generation_prompt.rstrip())]
    if end and tail.endswith(end) and not (start and tail.endswith(start) and len(start) > len(end)):
        mode = ReasoningMode.DISABLED
    elif start and tail.endswith(start):
        mode = ReasoningMode.FORCED_OPEN
    elif content and tail.endswith(content):
        return StartState(ReasoningMode.DISABLED if end else ReasoningMode.NONE, open_content=True, source="prompt")
    elif matches:  # the prompt ends with a setting's generation prompt: that setting's mode
        mode = max(matches, key=lambda s: len(s.generation_prompt)).reasoning_mode
    elif setting.mode in (ReasoningMode.FORCED_OPEN, ReasoningMode.DISABLED):
        mode = ReasoningMode.OPTIONAL if start and end else ReasoningMode.NONE  # no block was written
    else:
        mode = setting.mode
    return StartState(mode, source="prompt")
