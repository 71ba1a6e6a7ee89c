"""The analysis entry point: template → :class:`TemplateAnalysis`.

Example::

    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> a.content_structure.reasoning_start
    '<think>\\n'
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from .analysis_cache import Outcome, cached_analysis
from .caps import _info, probe_caps
from .content import detect_content
from ..errors import AnalysisError, RenderError, RenderLimitError, TemplateError
from .load import LoadedTemplate, load_template
from .prober import Prober
from .reasoning import detect_reasoning, mode_for, settings_modes
from .render import DEFAULT_LIMITS, RenderLimits, compile_error
from .structures import ContentStructure, ReasoningMode, TemplateAnalysis, ThinkingSetting
from .template_info import TemplateInfo
from .tool_calls import analyze_tools
from .turns import SettingRender, probe_turns

THINKING_ON = ("enable_thinking=true",)


def _thinking_setting(modes: list) -> tuple:
    """The setting that stands for "thinking on": enable_thinking=true, unless another
    control is what actually lets the model reason (e.g. ``thinking=true``)."""
    by_name = {s.name: (s, m) for s, m in modes}
    on = by_name.get("enable_thinking=true") or modes[0]
    if on[1] in (ReasoningMode.FORCED_OPEN, ReasoningMode.OPTIONAL):
        return on
    for wanted in (ReasoningMode.FORCED_OPEN, ReasoningMode.OPTIONAL):
        for s, m in modes:
            if m == wanted:
                return s, m
    return on


def _strip_reasoning_tail(header: str, reasoning) -> str:
    """The assistant header without a reasoning opener (or empty block) the prompt writes."""
    if reasoning is None:
        return header
    for marker in (reasoning.end.strip(), reasoning.start.strip()):
        if marker and header.rstrip().endswith(marker):
            header = header.rstrip()[:-len(marker)]
    return header


def _setting(s: SettingRender, mode: ReasoningMode, reasoning) -> ThinkingSetting:
    """A setting of the analysis, with its tools variant when tools change the mode."""
    tools_mode = mode_for(s.prompt_tools, reasoning, s.name) if s.prompt_tools is not None else None
    differs = tools_mode is not None and tools_mode != mode
    return ThinkingSetting(name=s.name, kwargs=s.kwargs, generation_prompt=s.prompt, reasoning_mode=mode,
                           tools_generation_prompt=s.prompt_tools if differs else None,
                           tools_reasoning_mode=tools_mode if differs else None)


def _variation_notes(prober: Prober, info: TemplateInfo | None) -> list[str]:
    """Notes on renders that vary from call to call (found by rendering probes again, or by
    the template's use of ``random``/``lipsum``)."""
    unstable = prober.unstable_probe()
    if unstable:
        return [f"nondeterministic: probe {unstable!r} rendered differently when rendered again; "
                "this analysis describes one of its renders"]
    if info is not None and info.random_sources:
        return [f"the template uses {', '.join(info.random_sources)}: its renders may differ from call to call"]
    return []


def analyze_template(template: str | Path | LoadedTemplate, *, engine: str = "jinja2",
                     limits: RenderLimits = DEFAULT_LIMITS, cache: bool = True) -> TemplateAnalysis:
    """Analyze a chat template (a path, or a template loaded with :func:`chat_autoparser.analyzer.load_template`).

    Raises ``TemplateError`` for input that is not a usable template (missing file, bad JSON,
    syntax error, over a compile limit), ``AnalysisError`` when no probe renders (saying so
    when the template renders differently each time), and ``RenderLimitError`` naming the
    probe when the analysis runs over ``limits.analysis_timeout_s``. A template whose renders
    vary (``random``, ``lipsum``, or found by rendering probes twice) is analysed, with a note.

    Analyses are kept by content (:mod:`chat_autoparser.analyzer.analysis_cache`: in memory, and on disk when
    ``AUTOPARSER_CACHE`` is set): the same template, engine and limits are analysed once.
    ``cache=False`` analyses afresh and keeps nothing.

    Example::

        >>> analyze_template("templates/chatml-think.jinja").caps.supports_tools
        True
    """
    deadline = time.monotonic() + limits.analysis_timeout_s
    loaded = template if isinstance(template, LoadedTemplate) else load_template(template)

    def compute() -> Outcome:
        return _analyze(loaded, engine, limits, deadline)

    if cache:
        return cached_analysis(loaded, engine=engine, limits=limits, compute=compute)
    result = compute().result
    if isinstance(result, TemplateAnalysis):
        return result
    raise result


def _analyze(loaded: LoadedTemplate, engine: str, limits: RenderLimits, deadline: float) -> Outcome:
    """The analysis, or the error it stopped with, and whether the template alone decided it;
    raises ``RenderLimitError`` past the analysis' time budget."""
    for src in set(loaded.variants.values()):
        err = compile_error(src, loaded.name, engine, limits)
        if err is not None:
            return Outcome(err, cacheable=not err.transient)
    prober = Prober(loaded, engine=engine, limits=limits, deadline=deadline)
    try:
        caps = probe_caps(prober)
        turns = probe_turns(prober, caps)
        info = _info(prober)
        reasoning = detect_reasoning(prober, caps, turns, info)
        modes = settings_modes(turns, reasoning)
        thinking, thinking_mode = _thinking_setting(modes)
        thinking_full = prober.render(f"generation_prompt[{thinking.name}]", list(turns.base),
                                      add_generation_prompt=True, **dict(thinking.kwargs))
        content = detect_content(turns, reasoning, thinking_full)
        tool_structure = analyze_tools(prober, caps, turns, reasoning, content.end_of_turn,
                                       (content.start, content.end), content.final_suffix)
    except RenderLimitError:
        raise  # the analysis' time budget, naming the probe
    except RenderError as e:  # a render that escaped the prober (should not happen)
        # its message names the template: not kept for another name
        return Outcome(AnalysisError(str(e), template=loaded.name), cacheable=False)
    except AnalysisError as e:
        unstable = prober.unstable_probe()
        if unstable:  # the probes disagreed because the template does: say so
            return Outcome(AnalysisError(f"{e.reason} (the template renders differently each time: probe "
                                         f"{unstable!r} changed when rendered again)", template=e.template,
                                         probe=e.probe), cacheable=False)
        return Outcome(e, cacheable=not prober.transient)
    header = _strip_reasoning_tail(turns.header, reasoning)
    notes = _variation_notes(prober, info)
    # renders that vary may analyse differently next time; a time limit met may not be met again
    cacheable = not notes and not prober.transient
    if loaded.tokens_are_stand_ins:
        notes.append("no tokenizer config: bos/eos stand-ins "
                     f"{loaded.special_tokens.get('bos_token')!r}, {loaded.special_tokens.get('eos_token')!r} were used")
    cs = ContentStructure(
        # the headline is the template's own default (a prompt rendered with no kwargs); the mode
        # under each setting is in thinking_settings
        reasoning_mode=modes[0][1] if modes else thinking_mode,
        reasoning_start=reasoning.start if reasoning else "",
        reasoning_end=reasoning.end if reasoning else "",
        content_mode=content.mode,
        content_start=content.start,
        content_end=content.end,
        reasoning_source=reasoning.source if reasoning else "",
        reasoning_kept=reasoning.kept if reasoning else "",
    )
    from dataclasses import replace
    prompts = {s.prompt for s, _ in modes}
    caps = replace(caps, reasoning_field=reasoning.field if reasoning else "",
                   supports_thinking_toggle=len(prompts) > 1 or len({m for _, m in modes}) > 1)
    settings = tuple(_setting(s, m, reasoning) for s, m in modes)
    sha = hashlib.sha256(loaded.source.encode("utf-8")).hexdigest()
    return Outcome(TemplateAnalysis(
        template=loaded.name, sha256=sha, engine=engine, caps=caps, content_structure=cs,
        generation_prompt=turns.default.prompt, generation_prompt_thinking=thinking.prompt,
        assistant_start=header, end_of_turn=content.end_of_turn, final_suffix=content.final_suffix,
        message_prefix=content.prefix,
        thinking_settings=settings,
        probe_failures=prober.recorded_failures(), fallback_renders=prober.recorded_fallbacks(),
        notes=tuple(notes), tool_call_structure=tool_structure, tokens_are_stand_ins=loaded.tokens_are_stand_ins),
        cacheable=cacheable)


__all__ = ["analyze_template", "TemplateError", "AnalysisError"]
