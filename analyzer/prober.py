"""Run probe renders: cached, named, with failures recorded instead of raised.

The analysis asks many questions of one template; the :class:`Prober` answers each with a
render, remembers it (the same input is never rendered twice), and records every failure
with the probe's name so reports can say which probe failed and why. Inputs that differ only in
variables the template never names (a kwarg it does not read, ``add_generation_prompt`` or
``tools`` where it never looks at them) render alike, so one render answers them all
(:attr:`TemplateInfo.inputs <chat_autoparser.analyzer.template_info.TemplateInfo.inputs>`); each probe is still
recorded as if it had rendered.

When the reference engine fails for a reason other than the template refusing the input
(``raise_exception``) or a limit, the probe is retried with a relaxed sandbox (only where the
sandbox refused) and then with minijinja, and the retry is recorded: transformers itself
cannot render e.g. templates that call ``list.append``, but their output format can still be
learned. A limit binds every engine alike, so it is never retried.

Every render counts against the analysis' time budget (``RenderLimits.analysis_timeout_s``):
past it, :class:`RenderLimitError` is raised, naming the probe.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, Sequence

from ..errors import RenderError, RenderLimitError, SecurityError, TemplateError, TemplateRaised
from .load import LoadedTemplate
from .probes import as_parts
from .render import DEFAULT_LIMITS, RenderLimits, Renderer, make_renderer
from .structures import ProbeFailure
from .template_info import template_info

# Templates that print the date must not change output between two renders of one analysis.
PINNED_NOW = datetime(2026, 1, 15, 12, 0, 0)


class Prober:
    def __init__(self, template: LoadedTemplate, *, engine: str = "jinja2",
                 limits: RenderLimits = DEFAULT_LIMITS, fallbacks: bool = True,
                 deadline: float | None = None) -> None:
        self.template = template
        self.engine = engine
        self.limits = limits
        # time.monotonic() past which no probe renders (the analysis' budget)
        self.deadline = deadline if deadline is not None else time.monotonic() + limits.analysis_timeout_s
        now = lambda: PINNED_NOW  # noqa: E731
        self._primary = make_renderer(template, engine, limits=limits, now=now, reuse_tools=engine == "jinja2")
        self._fallbacks = []
        if fallbacks:
            if engine == "jinja2":
                self._fallbacks.append(make_renderer(template, "jinja2", limits=limits, now=now,
                                                     sandbox="relaxed"))
            self._fallbacks.append(make_renderer(template, "minijinja" if engine == "jinja2" else "jinja2",
                                                 limits=limits, now=now))
        for renderer in (self._primary, *self._fallbacks):
            renderer.deadline = self.deadline
        self._cache: dict[tuple, str | RenderError] = {}
        # key of what the template can see of an input -> (result, the renderer that gave it,
        # the fallback note to record): the one render of inputs that differ only in unread names
        self._shared: dict[tuple, tuple[str | RenderError, Renderer | None, str | None]] = {}
        # source -> the names it may read (None: any); tools drop out only where the template
        # text chosen does not depend on them
        self._inputs: dict[str, frozenset[str] | None] = {}
        try:
            self._one_source = template.source_for(tools=True) == template.source_for(tools=False)
        except TemplateError:  # several variants, none chosen: every render fails alike
            self._one_source = False
        # key -> (probe, renderer, input) of each successful render, to render it again
        self._rendered: dict[tuple, tuple[str, Renderer, tuple]] = {}
        # (reason, line) of reference failures no fallback could render: a probe failing the
        # same way at the same line is not retried (minijinja renders in a worker process,
        # and most templates refuse a few probes on both engines alike)
        self._futile: set[tuple[str, int | None]] = set()
        self._tool_keys: dict[int, int] = {}
        self._tool_texts: dict[str, int] = {}
        self._pinned: list[Any] = []
        self.failures: dict[str, ProbeFailure] = {}
        self.fallback_used: dict[str, str] = {}
        self.content_format = "string"
        # Tools passed when a probe passes none: set for templates that only render with tools.
        self.default_tools: list[dict[str, Any]] | None = None
        # Variables every render gets: stand-ins for custom variables a template cannot do without.
        self.default_kwargs: dict[str, Any] = {}
        self.renders = 0
        # set when a result depended on the machine (a render ran out of time or memory, the
        # repeat render was skipped): such an analysis is not cached (ChatAutoparserError.transient)
        self.transient = False

    def _tools_key(self, tools: Any) -> int:
        """A number per distinct tools list: they are large and shared between probes, so they are
        serialised once per list object (kept alive, so that its id stays its own)."""
        number = self._tool_keys.get(id(tools))
        if number is None:
            text = json.dumps(tools, sort_keys=True, default=repr)
            number = self._tool_texts.setdefault(text, len(self._tool_texts))
            self._tool_keys[id(tools)] = number
            self._pinned.append(tools)
        return number

    def _read(self, tools: bool) -> frozenset[str] | None:
        """The names the template text rendered with (or without) tools may read; None: any."""
        source = self.template.source_for(tools=tools)
        if source not in self._inputs:
            try:
                self._inputs[source] = template_info(source).inputs
            except Exception:  # noqa: BLE001 - jinja2 cannot parse it (minijinja can): assume any
                self._inputs[source] = None
        return self._inputs[source]

    def _keys(self, messages: Sequence[dict[str, Any]], tools: Any, agp: bool, kwargs: dict[str, Any]
              ) -> tuple[tuple, tuple]:
        """The input's key, and the key of what the template can see of it (variables it never
        names left out)."""
        head = repr(messages)  # (plain data: equal reprs, equal inputs, key order included)
        options = json.dumps(kwargs, sort_keys=True, default=repr) if kwargs else ""
        exact = (head, agp, options, self._tools_key(tools))
        read = self._read(tools is not None)
        if read is None:
            return exact, exact
        if "add_generation_prompt" not in read:
            agp = None
        if tools is not None and "tools" not in read and self._one_source:
            tools = None
        seen = {k: v for k, v in kwargs.items() if k in read}
        if len(seen) != len(kwargs):
            options = json.dumps(seen, sort_keys=True, default=repr) if seen else ""
        return exact, (head, agp, options, self._tools_key(tools))

    def render(self, probe: str, messages: Sequence[dict[str, Any]], *, tools: Sequence[Any] | None = None,
               add_generation_prompt: bool = False, record: bool = True, **kwargs: Any) -> str | None:
        """The render of a probe, or None when it fails (the failure is recorded under ``probe``)."""
        result = self.try_render(probe, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                 record=record, **kwargs)
        return result if isinstance(result, str) else None

    def try_render(self, probe: str, messages: Sequence[dict[str, Any]], *, tools: Sequence[Any] | None = None,
                   add_generation_prompt: bool = False, record: bool = True, **kwargs: Any
                   ) -> str | RenderError:
        msgs = as_parts(list(messages)) if self.content_format == "parts" else list(messages)
        if tools is None:
            tools = self.default_tools
        if self.default_kwargs:
            kwargs = {**self.default_kwargs, **kwargs}
        key, shared = self._keys(msgs, tools, add_generation_prompt, kwargs)
        if key not in self._cache:
            self._cache[key] = self._answer(probe, key, shared, (msgs, tools, add_generation_prompt, kwargs))
        out = self._cache[key]
        if isinstance(out, RenderError) and record and probe not in self.failures:
            kind = ("raised" if isinstance(out, TemplateRaised) else
                    "limit" if isinstance(out, RenderLimitError) else "error")
            self.failures[probe] = ProbeFailure(probe, out.reason, kind)
        return out

    def _over_budget(self, probe: str) -> RenderLimitError:
        return RenderLimitError(f"analysis took over {self.limits.analysis_timeout_s:g} s (analysis_timeout_s)",
                                template=self.template.name, probe=probe)

    def _answer(self, probe: str, key: tuple, shared: tuple, args: tuple) -> str | RenderError:
        """The result for a new input: rendered, or the render of an input the template sees
        alike, recorded for ``probe`` as its own render would have been."""
        hit = self._shared.get(shared)
        if hit is None:
            hit = self._shared[shared] = self._render(probe, *args)
            self.transient = self.transient or getattr(hit[0], "transient", False)
        out, renderer, note = hit
        if note is not None:
            self.fallback_used.setdefault(probe, note)
        if renderer is not None:
            self._rendered[key] = (probe, renderer, args)
        return out.with_probe(probe) if isinstance(out, RenderError) else out

    def _render(self, probe: str, msgs: list[dict[str, Any]], tools: Any, agp: bool, kwargs: dict[str, Any]
                ) -> tuple[str | RenderError, Renderer | None, str | None]:
        """(the render or its error, the renderer that gave it, a note when that was a fallback)."""
        if time.monotonic() >= self.deadline:
            raise self._over_budget(probe)
        self.renders += 1
        try:
            return self._primary.render(msgs, tools=tools, add_generation_prompt=agp, **kwargs), self._primary, None
        except TemplateRaised as e:
            return e.with_probe(probe), None, None
        except RenderLimitError as e:
            if time.monotonic() >= self.deadline:
                raise self._over_budget(probe) from None
            return e.with_probe(probe), None, None  # a limit binds every engine: no fallback
        except RenderError as e:
            first = e.with_probe(probe)
        if (first.reason, first.line) in self._futile:
            return first, None, None
        for fb in self._fallbacks:
            if getattr(fb, "sandbox", "") == "relaxed" and not isinstance(first, SecurityError):
                continue  # a mutable sandbox only helps where the immutable one refused
            try:
                out = fb.render(msgs, tools=tools, add_generation_prompt=agp, **kwargs)
            except (RenderError, TemplateError) as e:  # TemplateError: the fallback cannot compile it
                if time.monotonic() >= self.deadline:
                    raise self._over_budget(probe) from None
                self.transient = self.transient or e.transient
                continue
            return out, fb, f"{fb.engine} (reference failed: {first.reason})"
        self._futile.add((first.reason, first.line))
        return first, None, None

    def unstable_probe(self) -> str | None:
        """A probe whose render changes when rendered again (randomness in the template, or an
        object's address printed), or None. One render is repeated: the longest with a
        generation prompt, where a varying assistant header would show (else the longest). The
        source's own ``random``/``lipsum`` are found statically (``TemplateInfo.random_sources``)."""
        best: tuple[bool, int, str] | None = None
        for key, (probe, renderer, args) in self._rendered.items():
            out = self._cache.get(key)
            if isinstance(out, str) and (best is None or (bool(args[2]), len(out)) > best[:2]):
                best = (bool(args[2]), len(out), key)
        if best is None:
            return None
        if time.monotonic() >= self.deadline:
            self.transient = True  # not checked for want of time
            return None
        probe, renderer, (msgs, tools, agp, kwargs) = self._rendered[best[2]]
        try:
            again: str | None = renderer.render(msgs, tools=tools, add_generation_prompt=agp, **kwargs)
        except RenderLimitError as e:
            self.transient = self.transient or e.transient
            return None  # out of time or budget: says nothing about randomness
        except RenderError:
            again = None  # failed where it rendered before
        return probe if again != self._cache[best[2]] else None

    def recorded_failures(self) -> tuple[ProbeFailure, ...]:
        return tuple(self.failures[k] for k in sorted(self.failures))

    def recorded_fallbacks(self) -> tuple[str, ...]:
        return tuple(f"{k}: {v}" for k, v in sorted(self.fallback_used.items()))
