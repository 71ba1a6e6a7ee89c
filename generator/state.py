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
from typing import Any, Callable, Mapping

from chat_autoparser.analyzer.diff import common_prefix_len
from chat_autoparser.analyzer.structures import ReasoningMode, TemplateAnalysis, ThinkingSetting
from chat_autoparser.errors import RenderError

# renders the probe conversation (one user message) under a request's chat_template_kwargs:
# (with the generation prompt, without it)
PromptRenderer = Callable[[Mapping[str, Any]], "tuple[str, str]"]


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
    # request kwargs no probed setting holds, rendered on demand (or, with no renderer, not
    # taken into account); and names a template render cannot take (``messages``, ...)
    unprobed_kwargs: tuple[str, ...] = ()
    ignored_kwargs: tuple[str, ...] = ()
    generation_prompt: str | None = None  # rendered on demand for the request's kwargs
    render_error: str = ""  # the template refused to render the request's kwargs

    def to_dict(self) -> dict[str, Any]:
        out = {"reasoning_mode": self.mode.value, "open_content": self.open_content, "source": self.source,
               "template_kwargs": dict(self.template_kwargs)}
        if self.unprobed_kwargs:
            out["unprobed_kwargs"] = list(self.unprobed_kwargs)
        if self.ignored_kwargs:
            out["ignored_kwargs"] = list(self.ignored_kwargs)
        if self.render_error:
            out["render_error"] = self.render_error
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


# names a chat template render takes itself: a request's kwargs cannot set them
RESERVED_KWARGS = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                             "conversation", "chat_template", "tokenize", "return_dict"})


def kwargs_state(analysis: TemplateAnalysis, kwargs: Mapping[str, Any], *, with_tools: bool = False,
                 render: PromptRenderer | None = None) -> StartState:
    """The start state a request's ``chat_template_kwargs`` select, as engines pass them to the
    template: the probed setting with exactly these kwargs; else, with ``render``, the generation
    prompt those kwargs render (rendered on demand; the caller caches); else the probed setting
    of the kwargs the analysis probed, the others reported in ``unprobed_kwargs``. Never raises
    for a kwarg: names a render takes itself are reported in ``ignored_kwargs``.

    Example::

        >>> from chat_autoparser.analyzer import analyze_template
        >>> a = analyze_template("templates/chatml-think.jinja")
        >>> kwargs_state(a, {"enable_thinking": False}).mode.value
        'REASONING_DISABLED'
        >>> kwargs_state(a, {"enable_thinking": False, "my_flag": 1}).to_dict()["unprobed_kwargs"]
        ['my_flag']
    """
    ignored = tuple(sorted(k for k in kwargs if not isinstance(k, str) or k in RESERVED_KWARGS))
    usable = {k: v for k, v in kwargs.items() if isinstance(k, str) and k not in RESERVED_KWARGS}
    exact = next((s for s in analysis.thinking_settings if s.kwargs_dict == usable), None)
    if exact is None and not usable and analysis.thinking_settings:
        exact = analysis.setting("default") or analysis.thinking_settings[0]
    if exact is not None:
        return replace(_from_setting(exact, with_tools, usable), ignored_kwargs=ignored)
    probed = {k for s in analysis.thinking_settings for k, _ in s.kwargs}
    error = ""
    if render is not None:
        state = _rendered_state(analysis, render, usable)
        if isinstance(state, StartState):
            return replace(state, unprobed_kwargs=tuple(sorted(usable)), ignored_kwargs=ignored)
        error = state
    unprobed = tuple(sorted(k for k in usable if k not in probed))
    known = {k: v for k, v in usable.items() if k in probed}
    # the probed setting of the first kwarg the analysis probed with this value
    hit = next((s for k, v in known.items() for s in analysis.thinking_settings if s.kwargs == ((k, v),)), None)
    base = _from_setting(hit, with_tools, usable) if hit is not None else \
        replace(_setting_state(analysis, None, with_tools), template_kwargs=usable)
    unprobed += tuple(sorted(k for k in known if hit is None or hit.kwargs[0][0] != k))
    return replace(base, unprobed_kwargs=tuple(sorted(set(unprobed))), ignored_kwargs=ignored, render_error=error)


def _from_setting(s: ThinkingSetting, with_tools: bool, kwargs: Mapping[str, Any]) -> StartState:
    return StartState(s.mode_for(with_tools), source=f"setting:{s.name}" + (" with tools" if with_tools else ""),
                      template_kwargs=dict(kwargs))


def _rendered_state(analysis: TemplateAnalysis, render: PromptRenderer, kwargs: Mapping[str, Any]) -> StartState | str:
    """The mode the generation prompt rendered under ``kwargs`` leaves the model in (the render's
    error when the template does not render it): the reasoning markers at its end decide as in the analysis;
    with neither at the end, what the probed settings found for such prompts, and where that
    depended on the setting, whether the rendered prompt names the reasoning start (the
    template's instructions describe the block only then)."""
    try:
        full, plain = render(kwargs)
    except RenderError as e:  # the template refuses these kwargs: the caller falls back to the probed settings
        return str(e) or type(e).__name__
    gen = full[common_prefix_len(plain, full, tokens=True):]
    cs = analysis.content_structure
    start, end = cs.reasoning_start.strip(), cs.reasoning_end.strip()
    tail = full.rstrip()
    if not (start or end):
        mode = cs.reasoning_mode
    elif end and tail.endswith(end) and not (start and tail.endswith(start) and len(start) > len(end)):
        mode = ReasoningMode.DISABLED
    elif start and tail.endswith(start) or not start:
        mode = ReasoningMode.FORCED_OPEN
    else:
        open_modes = {s.reasoning_mode for s in analysis.thinking_settings} & {ReasoningMode.OPTIONAL, ReasoningMode.NONE}
        if len(open_modes) == 1:
            mode = open_modes.pop()
        elif open_modes:  # the probed settings differ: the instructions tell
            mode = ReasoningMode.OPTIONAL if start in full else ReasoningMode.NONE
        else:  # (no probed setting leaves the block to the model: as the prompt reader does)
            mode = ReasoningMode.OPTIONAL
    return StartState(mode, source="render:chat_template_kwargs", template_kwargs=dict(kwargs), generation_prompt=gen)


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
                prompt: str | None = None, with_tools: bool = False,
                chat_template_kwargs: Mapping[str, Any] | None = None,
                render: PromptRenderer | None = None) -> StartState:
    """The start state of the output for a request (see the module docstring); ``with_tools``:
    the request has tools (some templates write another generation prompt then);
    ``chat_template_kwargs``: the request's kwargs (:func:`kwargs_state`; ``enable_thinking`` is
    added to them when they do not set it). ``prompt`` has the last word."""
    if chat_template_kwargs is not None:
        kwargs = dict(chat_template_kwargs)
        if enable_thinking is not None:
            kwargs.setdefault("enable_thinking", enable_thinking)
        setting = kwargs_state(analysis, kwargs, with_tools=with_tools, render=render)
        if prompt is None:
            return setting
        state = _from_prompt(analysis, prompt, setting)
        return replace(state, template_kwargs=setting.template_kwargs, unprobed_kwargs=setting.unprobed_kwargs,
                       ignored_kwargs=setting.ignored_kwargs)
    if prompt is None:
        return _setting_state(analysis, enable_thinking, with_tools)
    return _from_prompt(analysis, prompt, _setting_state(analysis, enable_thinking, False))


def _from_prompt(analysis: TemplateAnalysis, prompt: str, setting: StartState) -> StartState:
    cs = analysis.content_structure
    markers = [m for m in (cs.reasoning_start.strip(), cs.reasoning_end.strip(), cs.content_start.strip()) if m]
    lead = _cut_marker(prompt, markers)
    if not lead:
        return _prompt_state(analysis, prompt, setting)
    full = next(m for m in markers if m.startswith(lead))
    return replace(_prompt_state(analysis, prompt[:-len(lead)], setting), completion=full[len(lead):],
                   completed=_prompt_state(analysis, prompt[:-len(lead)] + full, setting))


def _prompt_state(analysis: TemplateAnalysis, prompt: str, setting: StartState) -> StartState:
    cs = analysis.content_structure
    start, end = cs.reasoning_start.strip(), cs.reasoning_end.strip()
    content = cs.content_start.strip()
    tail = prompt.rstrip()
    matches = [s for s in analysis.thinking_settings if s.generation_prompt.strip() and
               tail.endswith(s.generation_prompt.rstrip())]
    best = None
    if matches:  # the longest generation prompt that ends the prompt; among equals, the request's setting
        longest = max(len(s.generation_prompt.rstrip()) for s in matches)
        named = setting.source.removeprefix("setting:").removesuffix(" with tools")
        tied = [s for s in matches if len(s.generation_prompt.rstrip()) == longest]
        best = next((s for s in tied if s.name == named), tied[0])
    # a content marker that is also the end of a setting's own generation prompt and is the
    # assistant's header (written again after reasoning by some templates), or has no closer of
    # its own (none, or the turn's end), is that prompt's end: the setting, whose output the
    # analysis read, decides; a wrapper the template closes (``<|open|>response`` ...
    # ``<|close|>response``) after another header is content the prompt opened
    closer = cs.content_end.strip()
    own_closer = bool(closer) and closer not in (analysis.end_of_turn.strip(), analysis.final_suffix.strip())
    header = best is not None and bool(content) and best.generation_prompt.rstrip().endswith(content) and \
        (not own_closer or content == analysis.assistant_start.strip())
    if end and tail.endswith(end) and not (start and tail.endswith(start) and len(start) > len(end)):
        mode = ReasoningMode.DISABLED
    elif start and tail.endswith(start):
        mode = ReasoningMode.FORCED_OPEN
    elif content and tail.endswith(content) and not header:
        return StartState(ReasoningMode.DISABLED if end else ReasoningMode.NONE, open_content=True, source="prompt")
    elif best is not None:  # the prompt ends with a setting's generation prompt: that setting's mode
        mode = best.reasoning_mode
    elif setting.mode in (ReasoningMode.FORCED_OPEN, ReasoningMode.DISABLED):
        mode = ReasoningMode.OPTIONAL if start and end else ReasoningMode.NONE  # no block was written
    else:
        mode = setting.mode
    return StartState(mode, source="prompt")
