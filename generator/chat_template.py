"""``ChatTemplate``: the one object a server holds per model. It renders prompts (as transformers
does, whole or incrementally, with capability polyfills on request), builds the parser of a
request, streams OpenAI chunks, and exports the analysis for other tools.

Example::

    >>> ct = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
    >>> ct.render([{"role": "user", "content": "Hi"}])
    '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
    >>> ct.parser().parser.parse("<think>\\nhm\\n</think>\\nHello")["content"]
    'Hello'
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from chat_autoparser.analyzer import analyze_template
from chat_autoparser.analyzer.formatter import format_call
from chat_autoparser.analyzer.hub import load_pretrained
from chat_autoparser.analyzer.load import LoadedTemplate, from_string
from chat_autoparser.analyzer.render import Renderer, make_renderer
from chat_autoparser.analyzer.structures import Caps, TemplateAnalysis

from .call_ids import call_ids, learn_id_shape
from .export import export
from .incremental import IncrementalRenderer
from .openai_chunks import ChunkStream
from .params import ChatParams, generate_parser
from .polyfill import Polyfilled, polyfill
from .state import StartState, start_state

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None


class ChatTemplate:
    """A model's chat template, its analysis (computed on first use) and its renderer."""

    def __init__(self, template: LoadedTemplate, *, engine: str = "jinja2", now: Callable[[], datetime] | None = None,
                 analysis: TemplateAnalysis | None = None) -> None:
        self.template = template
        self.engine = engine
        self._renderer: Renderer = make_renderer(template, engine, now=now)
        self._analysis = analysis
        self._incremental = IncrementalRenderer(self._render_plain)
        # the probe prompt rendered under a request's kwargs (bounded: kwargs come from requests)
        self._kwargs_prompts: dict[str, tuple[str, str]] = {}
        self._id_shape: str | None = None

    @classmethod
    def from_pretrained(cls, src: str | Path, *, revision: str | None = None, template_name: str | None = None,
                        special_tokens: Mapping[str, Any] | None = None, **options: Any) -> ChatTemplate:
        """From a ``.jinja`` file, ``tokenizer_config.json``, ``chat_template.json``, a model
        directory, a ``.gguf``, a template's text, or a Hugging Face model id (through
        ``huggingface_hub``: its cache, ``HF_HUB_OFFLINE``). Raises TemplateError."""
        return cls(load_pretrained(src, revision=revision, template_name=template_name,
                                   special_tokens=special_tokens), **options)

    @classmethod
    def from_string(cls, source: str, *, name: str = "<string>", special_tokens: Mapping[str, Any] | None = None,
                    **options: Any) -> ChatTemplate:
        """From a template's text (``<s>``/``</s>`` stand in for bos/eos unless given)."""
        return cls(from_string(source, name=name, special_tokens=special_tokens), **options)

    # ---- analysis
    @property
    def analysis(self) -> TemplateAnalysis:
        """The template's analysis (computed once)."""
        if self._analysis is None:
            self._analysis = analyze_template(self.template, engine=self.engine)
        return self._analysis

    @property
    def caps(self) -> Caps:
        return self.analysis.caps

    @property
    def id_shape(self) -> str:
        """The shape of the call ids this template accepts (``call``: ``call_`` + hex; ``alnum9``:
        nine alphanumerics, for templates that refuse others), learned once by rendering a call
        and its result (:func:`~chat_autoparser.generator.call_ids.learn_id_shape`)."""
        if self._id_shape is None:
            if not self.analysis.tool_call_structure.call_parts:
                self._id_shape = "call"
            else:
                from chat_autoparser.analyzer.caps import tool_forms
                tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
                    "type": "object", "properties": {"city": {"type": "string"}}}}}]
                self._id_shape = learn_id_shape(lambda m: self._render_plain(m, tools, False),
                                                tool_forms(self.caps).args_as_string)
        return self._id_shape

    # ---- rendering
    def _render_plain(self, messages: Messages, tools: Tools = None, add_generation_prompt: bool = False,
                      **kwargs: Any) -> str:
        return self._renderer.render(messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs)

    def polyfill(self, messages: Messages, tools: Tools = None) -> Polyfilled:
        """``messages`` and ``tools`` rewritten only where the caps say the template lacks a
        feature; ``applied`` says what was done (see :mod:`chat_autoparser.generator.polyfill`)."""
        return polyfill(self.caps, messages, tools, example_call=self._example_call(tools))

    def _example_call(self, tools: Tools) -> str:
        ts = self.analysis.tool_call_structure
        if not tools or not ts.call_parts:
            return ""
        fn = tools[0].get("function", tools[0])
        args = {k: "..." for k in (fn.get("parameters") or {}).get("properties", {})}
        return format_call(ts, fn["name"], args, "call_0", 0)

    def render(self, messages: Messages, tools: Tools = None, add_generation_prompt: bool = True, *,
               polyfill: bool = False, chat_template_kwargs: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """The prompt, byte for byte what transformers' ``apply_chat_template(..., tokenize=False)``
        gives; with ``polyfill`` the conversation is first rewritten where the template lacks a
        feature (:meth:`polyfill` says what it does). ``chat_template_kwargs`` (the engines' form)
        and ``kwargs`` are both passed to the template (``kwargs`` win)."""
        if polyfill:
            p = self.polyfill(messages, tools)
            messages, tools = p.messages, p.tools
        return self._render_plain(messages, tools, add_generation_prompt, **{**(chat_template_kwargs or {}), **kwargs})

    def render_incremental(self, messages: Messages, tools: Tools = None, add_generation_prompt: bool = False, *,
                           polyfill: bool = False, **kwargs: Any) -> str:
        """The text the last message adds to the conversation's rendering (the conversation
        without it is rendered once and cached: one render per message added in turn)."""
        if polyfill:
            p = self.polyfill(messages, tools)
            messages, tools = p.messages, p.tools
        return self._incremental.render(messages, add_generation_prompt=add_generation_prompt, tools=tools, **kwargs)

    # ---- parsing and exports
    def parser(self, tools: Tools = None, tool_choice: Literal["auto", "required", "none"] = "auto",
               parallel_tool_calls: bool = True, prompt: str | None = None, *,
               chat_template_kwargs: Mapping[str, Any] | None = None, id_basis: str | None = None,
               **kwargs: Any) -> ChatParams:
        """The parser, grammar and triggers of a request (see :func:`chat_autoparser.generator.generate_parser`;
        ``kwargs``: ``enable_thinking``, ``id_factory``, ``calls_in_reasoning``).
        ``chat_template_kwargs``: the request's template kwargs, as engines pass them: the parser
        is built for the setting they select; kwargs the analysis did not probe are rendered (once
        per distinct kwargs) to find it. Calls the model writes with no id get ids in the shape the
        template accepts (:attr:`id_shape`), derived from ``id_basis`` (default: the prompt), so each
        turn of a conversation gets its own (:mod:`~chat_autoparser.generator.call_ids`).

        Example::

            >>> ct = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
            >>> ct.parser(chat_template_kwargs={"enable_thinking": False}).start["reasoning_mode"]
            'REASONING_DISABLED'
        """
        if kwargs.get("id_factory") is None:
            basis = id_basis if id_basis is not None else prompt or ""
            kwargs["id_factory"] = call_ids(basis, self.id_shape)
        return generate_parser(self.analysis, tools=tools, tool_choice=tool_choice,
                               parallel_tool_calls=parallel_tool_calls, prompt=prompt,
                               chat_template_kwargs=chat_template_kwargs,
                               prompt_renderer=self._renderer_for(chat_template_kwargs, tools), **kwargs)

    def start_state(self, prompt: str | None = None, *, chat_template_kwargs: Mapping[str, Any] | None = None,
                    tools: Tools = None) -> StartState:
        """Where a request's output starts (what :meth:`parser` builds its parser for), without
        building the parser: for a server that asks often (has the reasoning ended by now?)."""
        return start_state(self.analysis, prompt=prompt, with_tools=bool(tools),
                           chat_template_kwargs=chat_template_kwargs,
                           render=self._renderer_for(chat_template_kwargs, tools))

    def _renderer_for(self, chat_template_kwargs: Mapping[str, Any] | None, tools: Tools):
        """What renders kwargs the analysis did not probe (None when the request has none)."""
        if chat_template_kwargs is None:
            return None
        return lambda kw: self._kwargs_prompt(kw, tools)

    def _kwargs_prompt(self, kwargs: Mapping[str, Any], tools: Tools) -> tuple[str, str]:
        """The probe conversation (one user message) rendered with and without the generation
        prompt under ``kwargs`` (and the request's tools), cached by their JSON."""
        try:
            key: str | None = json.dumps([kwargs, tools], sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):  # not cacheable: rendered every time
            key = None
        hit = self._kwargs_prompts.get(key) if key is not None else None
        if hit is None:
            messages = [{"role": "user", "content": "Hello"}]
            hit = (self._render_plain(messages, tools, True, **kwargs), self._render_plain(messages, tools, False, **kwargs))
            if key is not None:
                if len(self._kwargs_prompts) >= 64:
                    self._kwargs_prompts.pop(next(iter(self._kwargs_prompts)))
                self._kwargs_prompts[key] = hit
        return hit

    def chunks(self, params: ChatParams, **options: Any) -> ChunkStream:
        """An OpenAI ``chat.completion.chunk`` stream of a request's output (options:
        ``completion_id``, ``model``, ``created``)."""
        return ChunkStream(params.parser.stream(), self.analysis, **options)

    def export(self, fmt: str, tools: Tools = None, **kwargs: Any) -> dict[str, Any] | str:
        """The analysis as ``fmt`` (``hf``, ``edgellm``, ``gbnf``, ``lark``, ``structural-tag``):
        a dict for the JSON formats, text for the grammars (see :mod:`chat_autoparser.generator.export`)."""
        return export(self.analysis, fmt, tools=tools, template=self.template, **kwargs)

