"""Replay a model's output text through vLLM's own parsing of a chat request, with this project's
plugin as its tool and reasoning parser: what a vLLM server would return for it, one-shot and
streamed, without a model or a GPU.

vLLM's ``ParserManager.get_parser("autoparser", "autoparser")`` composes the parsers into its own
``DelegatingParser``; :func:`replay` calls its ``parse`` (the non-streaming path of
``OpenAIServingChat``) and ``parse_delta`` (what its stream processor calls per delta, with the
prompt's token ids, ``finished`` on the last), with vLLM's own ``ChatCompletionRequest``, and
accumulates the deltas as an OpenAI client does.

Tokens: :class:`CharTokenizer` gives one id per character (vLLM's serving code only decodes ids
and hands text to the parsers); any tokenizer with ``encode``/``decode``/``chat_template`` works.
"""

from __future__ import annotations

import json
from typing import Any

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager

from . import vllm as plugin  # registers the parsers


class CharTokenizer:
    """One id per character, carrying the template and its special tokens (what vLLM's parsers
    use of a tokenizer)."""

    def __init__(self, template: str, special_tokens: dict[str, Any] | None = None) -> None:
        self.chat_template = template
        for key, value in (special_tokens or {}).items():
            if isinstance(value, str):
                setattr(self, key, value)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(map(chr, ids))

    def get_vocab(self) -> dict[str, int]:
        return {}


def request(tools: list[dict[str, Any]] | None = None, chat_template_kwargs: dict[str, Any] | None = None,
            tool_choice: Any = None, **fields: Any) -> ChatCompletionRequest:
    """A vLLM chat request (one user message) with these tools and kwargs."""
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body.update(fields)
    if tools:
        body["tools"] = tools
        body["tool_choice"] = tool_choice or "auto"
    if chat_template_kwargs is not None:
        body["chat_template_kwargs"] = chat_template_kwargs
    return ChatCompletionRequest(**body)


def parser_class() -> type:
    """vLLM's composition of our two parsers, as ``vllm serve ... --tool-call-parser autoparser
    --reasoning-parser autoparser --enable-auto-tool-choice`` builds it."""
    assert plugin.NAME == "autoparser"
    return ParserManager.get_parser(tool_parser_name=plugin.NAME, reasoning_parser_name=plugin.NAME,
                                    enable_auto_tools=True)


def replay(tokenizer: Any, prompt: str, output: str, req: ChatCompletionRequest, *,
           step: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    """(one-shot, streamed) messages vLLM gives for ``output`` after ``prompt``: ``reasoning``,
    ``content`` (None when empty), ``calls`` as (name, arguments object) and their ``ids``; the
    stream is fed ``step`` token ids at a time."""
    cls = parser_class()
    kwargs = req.chat_template_kwargs
    one = cls(tokenizer, req.tools, chat_template_kwargs=kwargs, model_config=None)
    one.set_prompt_token_ids(tokenizer.encode(prompt))
    reasoning, content, calls = one.parse(output, req, enable_auto_tools=True)
    shot = {"reasoning": reasoning or None, "content": content or None,
            "calls": [(c.name, json.loads(c.arguments)) for c in calls or []], "ids": [c.id for c in calls or []]}
    streamed = cls(tokenizer, req.tools, chat_template_kwargs=kwargs, model_config=None)
    ids, prompt_ids = tokenizer.encode(output), tokenizer.encode(prompt)
    pieces = [(ids[i:i + step], i + step >= len(ids)) for i in range(0, len(ids), step)] or [([], True)]
    acc: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}}
    for piece, finished in pieces:
        d = streamed.parse_delta(tokenizer.decode(piece), piece, req, prompt_ids, finished=finished)
        if d is None:
            continue
        acc["reasoning"] += d.reasoning or ""
        acc["content"] += d.content or ""
        for tc in d.tool_calls:
            call = acc["calls"].setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += tc.id or ""
            if tc.function is not None:
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
    calls_in_order = [c for _, c in sorted(acc["calls"].items())]
    stream = {"reasoning": acc["reasoning"] or None, "content": acc["content"] or None,
              "calls": [(c["name"], json.loads(c["arguments"] or "{}")) for c in calls_in_order],
              "ids": [c["id"] for c in calls_in_order]}
    return shot, stream
