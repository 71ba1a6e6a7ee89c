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


def parser_class(name: str = plugin.NAME, tokenizer: Any = None) -> type:
    """vLLM's composition of the tool and reasoning parsers named ``name``, as ``vllm serve ...
    --tool-call-parser NAME --reasoning-parser NAME --enable-auto-tool-choice`` builds it (ours:
    ``autoparser``; vLLM's reader of an HF ``response_template``: ``hf``, which checks the
    tokenizer's template when given one)."""
    return ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True,
                                    tokenizer=tokenizer)


def replay(tokenizer: Any, prompt: str, output: str, req: ChatCompletionRequest, *,
           step: int = 3, parser: str = plugin.NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """(one-shot, streamed) messages vLLM gives for ``output`` after ``prompt``: ``reasoning``,
    ``content`` (None when empty), ``calls`` as (name, arguments object) and their ``ids``; the
    stream is fed ``step`` token ids at a time; ``parser``: the parsers' name."""
    cls = parser_class(parser, tokenizer if parser != plugin.NAME else None)
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


# ----------------------------------------------------------------------------- vLLM's serving code

def _serving(parser: str) -> Any:
    """vLLM's ``OpenAIServingChat`` with only what its response generators read: the parser
    class vLLM composes for ``--tool-call-parser NAME --reasoning-parser NAME
    --enable-auto-tool-choice`` (its engine client, model registry and renderer are not used
    once the prompt is rendered and the engine's outputs are at hand)."""
    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat
    serving = OpenAIServingChat.__new__(OpenAIServingChat)
    for name, value in {"response_role": "assistant", "enable_auto_tools": True,
                        "_include_reasoning_tokens_details": True, "enable_prompt_tokens_details": False,
                        "enable_log_outputs": False, "enable_log_deltas": False, "enable_force_include_usage": False,
                        "request_logger": None, "system_fingerprint": None, "enable_per_request_metrics": False,
                        "model_config": None, "default_chat_template_kwargs": {}}.items():
        setattr(serving, name, value)
    serving.parser_cls = parser_class(parser)
    return serving


def _outputs(prompt_ids: list[int], pieces: list[tuple[list[int], str, bool]]) -> Any:
    """The engine's outputs, as vLLM's engine streams them (delta text and ids per step)."""
    from vllm.outputs import CompletionOutput, RequestOutput

    async def gen():
        for ids, text, last in pieces:
            yield RequestOutput(request_id="replay", prompt=None, prompt_token_ids=prompt_ids, prompt_logprobs=None,
                                outputs=[CompletionOutput(index=0, text=text, token_ids=list(ids), cumulative_logprob=None,
                                                          logprobs=None, finish_reason="stop" if last else None)],
                                finished=last)
    return gen()


def serve(tokenizer: Any, prompt: str, output: str, req: ChatCompletionRequest, *, step: int = 3,
          parser: str = plugin.NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """(non-streaming, streamed) messages of vLLM's own chat-completion serving code for
    ``output`` after ``prompt``: ``chat_completion_full_generator`` (the response's message) and
    ``chat_completion_stream_generator`` (its ``data:`` chunks accumulated as an OpenAI client
    does), the engine's outputs replayed ``step`` token ids at a time; same keys as :func:`replay`
    plus ``finish_reason``."""
    import asyncio
    from vllm.entrypoints.generate.base.protocol import RequestResponseMetadata

    serving = _serving(parser)
    ids, prompt_ids = tokenizer.encode(output), tokenizer.encode(prompt)
    steps = [(ids[i:i + step], tokenizer.decode(ids[i:i + step]), i + step >= len(ids))
             for i in range(0, len(ids), step)] or [([], "", True)]
    whole = [(ids, output, True)]
    kwargs = req.chat_template_kwargs
    conversation = [{"role": "user", "content": "hi"}]

    async def run() -> tuple[Any, list[dict[str, Any]]]:
        parser_obj = serving._make_parser(req, tokenizer, kwargs)
        response = await serving.chat_completion_full_generator(
            req, _outputs(prompt_ids, whole), "chatcmpl-replay", "m", conversation, tokenizer,
            RequestResponseMetadata(request_id="chatcmpl-replay"), parser=parser_obj)
        chunks = []
        async for line in serving.chat_completion_stream_generator(
                req, _outputs(prompt_ids, steps), "chatcmpl-replay", "m", conversation, tokenizer,
                RequestResponseMetadata(request_id="chatcmpl-replay"), chat_template_kwargs=kwargs):
            payload = line.removeprefix("data: ").strip()
            if payload and payload != "[DONE]":
                chunks.append(json.loads(payload))
        return response, chunks

    response, chunks = asyncio.run(run())
    if not hasattr(response, "choices"):
        raise RuntimeError(f"vLLM answered with an error: {response}")
    msg = response.choices[0].message
    calls = msg.tool_calls or []
    full = {"reasoning": getattr(msg, "reasoning", None) or None, "content": msg.content or None,
            "calls": [(c.function.name, json.loads(c.function.arguments)) for c in calls],
            "ids": [c.id for c in calls], "finish_reason": response.choices[0].finish_reason}
    acc: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "finish_reason": None}
    for chunk in chunks:
        if "error" in chunk:
            raise RuntimeError(f"vLLM streamed an error: {chunk['error']}")
        for choice in chunk.get("choices") or []:
            d = choice.get("delta") or {}
            acc["reasoning"] += d.get("reasoning") or ""
            acc["content"] += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                call = acc["calls"].setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] += tc.get("id") or ""
                fn = tc.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            acc["finish_reason"] = choice.get("finish_reason") or acc["finish_reason"]
    in_order = [c for _, c in sorted(acc["calls"].items())]
    streamed = {"reasoning": acc["reasoning"] or None, "content": acc["content"] or None,
                "calls": [(c["name"], json.loads(c["arguments"] or "{}")) for c in in_order],
                "ids": [c["id"] for c in in_order], "finish_reason": acc["finish_reason"]}
    return full, streamed
