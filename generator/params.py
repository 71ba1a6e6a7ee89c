"""``generate_parser``: everything a server needs for one request shape (``ChatParams``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from chat_autoparser.analyzer.structures import ReasoningMode, TemplateAnalysis

from .assemble import IdFactory
from .gbnf import grammar_bundle
from .parser import MessageParser
from .state import PromptRenderer, thinking_setting


@dataclass(frozen=True)
class ChatParams:
    """Parser, grammar, triggers, preserved tokens and generation prompt for one request shape;
    built once by :func:`generate_parser` (frozen: a server may share it between requests)."""

    parser: MessageParser
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: list[dict[str, str]] = field(default_factory=list)
    preserved_tokens: list[str] = field(default_factory=list)
    generation_prompt: str = ""
    thinking_forced_open: bool = False
    # variables to pass to the chat template so that the prompt is the one this parser expects
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # where the parser assumes the output starts, and why (a thinking setting, or the prompt)
    start: dict[str, Any] = field(default_factory=dict)

    @property
    def lark_grammar(self) -> str | None:
        """The grammar in llguidance's Lark form (its own GBNF converter; None without a grammar;
        an ExportError that says so without llguidance installed)."""
        if self.grammar is None:
            return None
        from .export.grammars import gbnf_to_lark
        return gbnf_to_lark(self.grammar)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the parser, as plain data (what a server configures)."""
        return {"generation_prompt": self.generation_prompt, "chat_template_kwargs": self.chat_template_kwargs,
                "start": self.start, "thinking_forced_open": self.thinking_forced_open, "grammar": self.grammar,
                "grammar_lazy": self.grammar_lazy, "grammar_triggers": self.grammar_triggers,
                "preserved_tokens": self.preserved_tokens}


def generate_parser(analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None,
                    tool_choice: Literal["auto", "required", "none"] = "auto", parallel_tool_calls: bool = True,
                    enable_thinking: bool | None = None, prompt: str | None = None,
                    calls_in_reasoning: bool = True, id_factory: IdFactory | None = None,
                    chat_template_kwargs: Mapping[str, Any] | None = None,
                    prompt_renderer: PromptRenderer | None = None) -> ChatParams:
    """Build the parser (and, with tools, the grammar and triggers) for one request shape.

    ``enable_thinking``: None means the template's own default (a prompt rendered with no
    kwargs); ``prompt``: the prompt the server rendered (or its tail), whose end then says where
    the output starts (reasoning opened or closed, content opened) whatever the setting;
    ``calls_in_reasoning``: an unclosed reasoning block ends at a well-formed call to a known
    tool (reported in ``parse_warnings``); ``id_factory(index, name, text_before)`` gives the id of a
    call the model wrote none for; ``text_before`` is the length and the last characters of the
    reasoning and of the content before it (default: :func:`~chat_autoparser.generator.assemble.default_call_id`,
    deterministic); ``chat_template_kwargs``: the request's template kwargs, as engines pass them
    to the template (``{"thinking": True}``, ``{"reasoning_effort": "high"}``, any flag): the
    parser is built for the setting they select, a probed one or, with ``prompt_renderer``
    (:meth:`ChatTemplate.parser <chat_autoparser.generator.chat_template.ChatTemplate.parser>` passes one), the generation prompt
    they render; they never raise (what was not taken into account is in ``start``).
    ``ChatParams.start`` says what the parser assumed.
    Example::

        >>> from chat_autoparser.analyzer import analyze_template
        >>> params = generate_parser(analyze_template("templates/chatml-think.jinja"))
        >>> params.parser.parse("<think>\\nok\\n</think>\\nDone")["reasoning_content"]
        'ok'
    """
    if tool_choice not in ("auto", "required", "none"):
        raise ValueError(f"tool_choice must be 'auto', 'required' or 'none', not {tool_choice!r}")
    parser = MessageParser(analysis, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                           enable_thinking=enable_thinking, prompt=prompt, calls_in_reasoning=calls_in_reasoning,
                           id_factory=id_factory, chat_template_kwargs=chat_template_kwargs,
                           prompt_renderer=prompt_renderer)
    state = parser.state
    if chat_template_kwargs is not None:
        named = state.source.removeprefix("setting:").removesuffix(" with tools")
        setting = analysis.setting(named) if state.source.startswith("setting:") else None
        generation_prompt = state.generation_prompt if state.generation_prompt is not None else \
            setting.generation_prompt if setting is not None else analysis.generation_prompt
        kwargs = dict(state.template_kwargs)
    else:
        setting = thinking_setting(analysis, enable_thinking)
        generation_prompt = setting.generation_prompt if setting is not None else analysis.generation_prompt
        kwargs = setting.kwargs_dict if setting is not None else {}
    grammar = grammar_bundle(analysis, tools, tool_choice, parallel_tool_calls, parser.mode)
    return ChatParams(parser=parser, grammar=grammar.grammar, grammar_lazy=grammar.lazy,
                      grammar_triggers=grammar.triggers, preserved_tokens=grammar.preserved_tokens,
                      generation_prompt=generation_prompt, thinking_forced_open=parser.mode == ReasoningMode.FORCED_OPEN,
                      chat_template_kwargs=kwargs, start=state.to_dict())
