"""Run probe renders: cached, named, with failures recorded instead of raised.

The analysis asks many questions of one template; the :class:`Prober` answers each with a
render, remembers it (the same input is never rendered twice), and records every failure
with the probe's name so reports can say which probe failed and why.

When the reference engine fails for a reason other than the template refusing the input
(``raise_exception``), the probe is retried with a relaxed sandbox and then with minijinja,
and the retry is recorded: transformers itself cannot render e.g. templates that call
``list.append``, but their output format can still be learned.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from .errors import RenderError, RenderLimitError, TemplateError, TemplateRaised
from .load import LoadedTemplate
from .probes import as_parts
from .render import DEFAULT_LIMITS, RenderLimits, make_renderer
from .structures import ProbeFailure

# Templates that print the date must not change output between two renders of one analysis.
PINNED_NOW = datetime(2026, 1, 15, 12, 0, 0)


class Prober:
    def __init__(self, template: LoadedTemplate, *, engine: str = "jinja2",
                 limits: RenderLimits = DEFAULT_LIMITS, fallbacks: bool = True) -> None:
        self.template = template
        self.engine = engine
        now = lambda: PINNED_NOW  # noqa: E731
        self._primary = make_renderer(template, engine, limits=limits, now=now, reuse_tools=engine == "jinja2")
        self._fallbacks = []
        if fallbacks:
            if engine == "jinja2":
                self._fallbacks.append(make_renderer(template, "jinja2", limits=limits, now=now,
                                                     sandbox="relaxed"))
            self._fallbacks.append(make_renderer(template, "minijinja" if engine == "jinja2" else "jinja2",
                                                 limits=limits, now=now))
        self._cache: dict[str, str | RenderError] = {}
        self._tool_keys: dict[int, str] = {}
        self._pinned: list[Any] = []
        self.failures: dict[str, ProbeFailure] = {}
        self.fallback_used: dict[str, str] = {}
        self.content_format = "string"
        # Tools passed when a probe passes none: set for templates that only render with tools.
        self.default_tools: list[dict[str, Any]] | None = None
        # Variables every render gets: stand-ins for custom variables a template cannot do without.
        self.default_kwargs: dict[str, Any] = {}
        self.renders = 0

    def _key(self, messages: Sequence[dict[str, Any]], tools: Any, agp: bool, kwargs: dict[str, Any]) -> str:
        # tools are large and shared between probes: key them by identity, once
        tkey = self._tool_keys.get(id(tools))
        if tkey is None:
            tkey = json.dumps(tools, sort_keys=True, default=repr)
            self._tool_keys[id(tools)] = tkey
            self._pinned.append(tools)  # keep the id valid for the prober's lifetime
        return json.dumps([messages, agp, kwargs], sort_keys=True, default=repr) + tkey

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
        key = self._key(msgs, tools, add_generation_prompt, kwargs)
        if key not in self._cache:
            self._cache[key] = self._render(probe, msgs, tools, add_generation_prompt, kwargs)
        out = self._cache[key]
        if isinstance(out, RenderError) and record and probe not in self.failures:
            kind = ("raised" if isinstance(out, TemplateRaised) else
                    "limit" if isinstance(out, RenderLimitError) else "error")
            self.failures[probe] = ProbeFailure(probe, out.reason, kind)
        return out

    def _render(self, probe: str, msgs: list[dict[str, Any]], tools: Any, agp: bool,
                kwargs: dict[str, Any]) -> str | RenderError:
        self.renders += 1
        try:
            return self._primary.render(msgs, tools=tools, add_generation_prompt=agp, **kwargs)
        except TemplateRaised as e:
            return e.with_probe(probe)
        except RenderError as e:
            first = e.with_probe(probe)
        for fb in self._fallbacks:
            if getattr(fb, "sandbox", "") == "relaxed" and "sandbox refused" not in first.reason:
                continue  # a mutable sandbox only helps where the immutable one refused
            try:
                out = fb.render(msgs, tools=tools, add_generation_prompt=agp, **kwargs)
            except (RenderError, TemplateError):  # TemplateError: the fallback cannot compile it
                continue
            self.fallback_used.setdefault(probe, f"{fb.engine} (reference failed: {first.reason})")
            return out
        return first

    def recorded_failures(self) -> tuple[ProbeFailure, ...]:
        return tuple(self.failures[k] for k in sorted(self.failures))

    def recorded_fallbacks(self) -> tuple[str, ...]:
        return tuple(f"{k}: {v}" for k, v in sorted(self.fallback_used.items()))
