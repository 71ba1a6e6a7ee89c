"""vLLM tool- and reasoning-parser plugin: tool calling and reasoning for any model with a chat
template, by analysis of that template (no parser per model).

Serve with::

    vllm serve MODEL --enable-auto-tool-choice --tool-call-parser autoparser --reasoning-parser autoparser

(the package registers both through vLLM's ``vllm.general_plugins`` entry point; or name this
file with ``--tool-parser-plugin`` / ``--reasoning-parser-plugin``). The template is the one the
tokenizer carries, or the file ``$AUTOPARSER_CHAT_TEMPLATE`` names (use it with vLLM's
``--chat-template``), analysed once per process.

How vLLM drives the pair (``vllm.parser.abstract_parser.DelegatingParser``): the reasoning
parser reads the output first and hands the text after the reasoning to the tool parser; both
are "engine based" (vLLM passes each delta once and asks them to flush at the end), so nothing
the parser holds back (a marker's first characters) is lost at the end of the output. The
request's ``chat_template_kwargs``, ``tools``, ``tool_choice`` and ``parallel_tool_calls`` build
the parser, and the prompt (token ids vLLM hands over, decoded) says where the output starts.
Without the reasoning parser, reasoning stays in ``content`` with its markers (as vLLM does
with no reasoning parser; vLLM tells the tool parser by ``skip_reasoning_parsing``).
``tool_choice="required"`` or a named tool: ``adjust_request`` puts this project's
grammar for the request into ``structured_outputs.grammar`` (vLLM's guidance backend), for the
output after the reasoning when the reasoning parser is in use (vLLM constrains only that).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from typing import Any, Sequence

from vllm.entrypoints.generate.base.protocol import (DeltaFunctionCall, DeltaMessage, DeltaToolCall,
                                                     ExtractedToolCallInformation, FunctionCall, ToolCall)
from vllm.reasoning import ReasoningParser, ReasoningParserManager
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

from chat_autoparser.analyzer.load import from_string
from chat_autoparser.analyzer.structures import ReasoningMode
from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.generator.chat_template import ChatTemplate
from chat_autoparser.generator.openai_chunks import ChunkStream
from chat_autoparser.generator.params import ChatParams

NAME = "autoparser"
ENV_TEMPLATE = "AUTOPARSER_CHAT_TEMPLATE"
PROMPT_TAIL_TOKENS = 256  # the prompt's end decides where the output starts
_TEMPLATES: dict[str, ChatTemplate] = {}


# ----------------------------------------------------------------------------- shared helpers

def _special_tokens(tokenizer: Any) -> dict[str, str]:
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = getattr(tokenizer, key, None)
        if isinstance(value, str):
            out[key] = value
    return out


def template_for(tokenizer: Any) -> ChatTemplate:
    """The ChatTemplate the server renders with: ``$AUTOPARSER_CHAT_TEMPLATE`` (the file given to
    vLLM's ``--chat-template``), else the tokenizer's (named templates kept as such: with tools,
    ``tool_use`` is analysed for the calls, as vLLM and transformers render it); analysed once per
    process (keyed by the template's text). A request's own ``chat_template`` is not followed."""
    source: Any = None
    name = "tokenizer chat_template"
    if os.environ.get(ENV_TEMPLATE):
        path = os.environ[ENV_TEMPLATE]
        with open(path, encoding="utf-8") as f:
            source, name = f.read(), os.path.basename(path)
    if not source:
        source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, str):
        variants = {"default": source} if source else {}
    elif isinstance(source, dict):
        variants = {str(k): v for k, v in source.items() if isinstance(v, str) and v}
    else:
        variants = {}
    if not variants:
        raise ValueError(f"{NAME}: no chat template (the tokenizer has none; set ${ENV_TEMPLATE} to a .jinja file)")
    tokens = _special_tokens(tokenizer)
    key = hashlib.sha256(json.dumps([variants, sorted(tokens.items())]).encode("utf-8", "surrogatepass")).hexdigest()
    ct = _TEMPLATES.get(key)
    if ct is None:
        if len(_TEMPLATES) >= 16:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))
        loaded = from_string(variants.get("default") or next(iter(variants.values())), name=name,
                             special_tokens=tokens or None)
        if len(variants) > 1:
            loaded = replace(loaded, variants=variants)
        ct = _TEMPLATES[key] = ChatTemplate(loaded)
    return ct


def _plain_tools(request: Any) -> list[dict[str, Any]] | None:
    tools = getattr(request, "tools", None)
    if not tools:
        return None
    return [t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools]


def _choice(request: Any, tools: list[dict[str, Any]] | None) -> tuple[str, list[dict[str, Any]] | None]:
    """(our tool_choice, the tools it allows) for the request's ``tool_choice``."""
    choice = getattr(request, "tool_choice", None)
    if choice in (None, "auto"):
        return "auto", tools
    if choice in ("none", "required"):
        return choice, tools
    fn = getattr(choice, "function", None)
    name = getattr(fn, "name", None) or getattr(choice, "name", None)
    if name and tools:
        return "required", [t for t in tools if t.get("function", t).get("name") == name] or tools
    return "auto", tools


def id_basis(request: Any) -> str:
    """What derives the ids of the calls a model writes without one: the request's conversation
    (each turn's ids differ; the same request parsed again gets the same ones)."""
    messages = getattr(request, "messages", None)
    if not messages:
        return ""
    plain = [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in messages]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _kwargs(request: Any, fallback: dict[str, Any] | None) -> dict[str, Any] | None:
    kwargs = getattr(request, "chat_template_kwargs", None) if request is not None else None
    return dict(kwargs) if kwargs is not None else fallback


def request_params(ct: ChatTemplate, request: Any, *, prompt: str | None,
                   chat_template_kwargs: dict[str, Any] | None, basis: str | None = None) -> ChatParams:
    """Our parser and grammar for a vLLM request: its tools, ``tool_choice`` and
    ``parallel_tool_calls``, with the start ``prompt``, the template kwargs and the ids' basis."""
    choice, allowed = _choice(request, _plain_tools(request))
    return ct.parser(tools=allowed, tool_choice=choice,
                     parallel_tool_calls=getattr(request, "parallel_tool_calls", None) is not False,
                     prompt=prompt, chat_template_kwargs=chat_template_kwargs, id_basis=basis)


def after_reasoning_prompt(ct: ChatTemplate) -> str | None:
    """A prompt that ends where the reasoning has closed (the parser then reads content and
    calls); None for a template with no reasoning end."""
    end = ct.analysis.content_structure.reasoning_end.strip()
    return end or None


def reasoning_split(text: str, reasoning: str | None, end_marker: str, start_marker: str = "") -> int:
    """Where the text after the reasoning starts in ``text``, given the reasoning the parser read:
    after the end marker that follows it (only whitespace between), else right after the
    reasoning (:func:`align_to_content` then drops the whitespace the template writes there).

    Example::

        >>> reasoning_split("<think>plan</think>Hi", "plan", "</think>")
        19
        >>> reasoning_split("Hi", None, "</think>")
        0
        >>> reasoning_split("<think>think</think>Hi", "think", "</think>", "<think>")
        20
    """
    if not reasoning:
        if end_marker and text.lstrip().startswith(end_marker):  # an empty block closed
            return text.index(end_marker) + len(end_marker)
        return 0
    begin = 0
    if start_marker:  # (the reasoning's text may also be in the marker: look after it)
        k = text.find(start_marker)
        begin = k + len(start_marker) if k >= 0 else 0
    at = text.find(reasoning, begin)
    if at < 0:
        at = text.find(reasoning.strip(), begin)
        reasoning = reasoning.strip()
    if at < 0:
        k = text.find(end_marker) if end_marker else -1
        return k + len(end_marker) if k >= 0 else 0
    j = at + len(reasoning)
    if end_marker:
        k = text.find(end_marker, j)
        if k >= 0 and not text[j:k].strip():
            return k + len(end_marker)
    return j


def align_to_content(rest: str, content: str | None) -> str:
    """``rest`` (the text after the reasoning) without the whitespace the template writes before
    the content, so that the tool parser, which starts there, reads the content the parser read.

    Example::

        >>> align_to_content("\\n\\nHi <call>", "Hi ")
        'Hi <call>'
        >>> align_to_content("\\n\\n<call>", None)
        '<call>'
    """
    body = rest.lstrip()
    if not content:
        return body
    lead = len(content) - len(content.lstrip())
    if content.lstrip() and not body.startswith(content.lstrip()[:16]):
        return rest  # a content wrapper or other text first: the tool parser reads it whole
    return rest[len(rest) - len(body) - lead:] if lead <= len(rest) - len(body) else rest


def _delta(chunks: Sequence[dict[str, Any]]) -> DeltaMessage | None:
    """One vLLM DeltaMessage of our chat.completion.chunk deltas (role deltas dropped)."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[DeltaToolCall] = []
    for chunk in chunks:
        d = chunk["choices"][0]["delta"]
        if d.get("role"):
            continue
        if d.get("content"):
            content.append(d["content"])
        if d.get("reasoning_content"):
            reasoning.append(d["reasoning_content"])
        for c in d.get("tool_calls") or []:
            fn = c.get("function")
            calls.append(DeltaToolCall(index=c["index"], id=c.get("id"), type=c.get("type"),
                                       function=DeltaFunctionCall(name=fn.get("name"), arguments=fn.get("arguments"))
                                       if fn else None))
    if not (content or reasoning or calls):
        return None
    return DeltaMessage(content="".join(content) or None, reasoning="".join(reasoning) or None, tool_calls=calls)


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False)


# ----------------------------------------------------------------------------- reasoning parser

class AutoparserReasoningParser(ReasoningParser):
    """Reasoning by the template's analysis: the start state from the prompt and the request's
    ``chat_template_kwargs``; the text after the reasoning goes on to the tool parser as written."""

    engine_based_streaming = True

    def __init__(self, tokenizer: Any, *args: Any, chat_template_kwargs: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self.ct = template_for(tokenizer)
        self.chat_template_kwargs = chat_template_kwargs
        self.prompt: str | None = None
        self._stream: ChunkStream | None = None
        self._raw = ""
        self._reasoning = ""
        self._ended = False
        self._content: str | None = None  # the content read first, once the reasoning ended
        self._flushed = False
        cs = self.ct.analysis.content_structure
        self._end = cs.reasoning_end.strip()
        self._start = cs.reasoning_start.strip()
        prefix = self.ct.analysis.message_prefix
        self._prefix = prefix if not prefix.strip() else ""

    @property
    def reasoning_start_str(self) -> str | None:
        return self.ct.analysis.content_structure.reasoning_start.strip() or None

    @property
    def reasoning_end_str(self) -> str | None:
        return self._end or None

    def _params(self, request: Any = None) -> ChatParams:
        kwargs = self.chat_template_kwargs if self.chat_template_kwargs is not None else _kwargs(request, None)
        return request_params(self.ct, request, prompt=self.prompt, chat_template_kwargs=kwargs)

    def adjust_request(self, request: Any) -> Any:
        """Called before the tool parser's: special tokens kept in the text; our grammar for the
        output after the reasoning."""
        return constrain(self.ct, keep_special_tokens(self.ct, request), after_reasoning=True)

    # -- the prompt
    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self.prompt = _decode(self.model_tokenizer, list(prompt_token_ids)[-PROMPT_TAIL_TOKENS:])

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self.set_prompt_token_ids(prompt_token_ids)

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether text ending with these ids has no reasoning left open (the prompt, or an output
        so far): the parser's start state for such a prompt reads no reasoning to come."""
        tail = _decode(self.model_tokenizer, list(input_ids)[-PROMPT_TAIL_TOKENS:])
        mode = self.ct.start_state(tail, chat_template_kwargs=self.chat_template_kwargs).mode
        return mode in (ReasoningMode.DISABLED, ReasoningMode.NONE)

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Sequence[int]) -> bool:
        if self._end and self._end in _decode(self.model_tokenizer, list(delta_ids)):
            return True
        return self.is_reasoning_end(input_ids)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        end_id = self.vocab.get(self._end) if self._end else None
        if end_id is None or end_id not in input_ids:
            return input_ids
        return input_ids[len(input_ids) - input_ids[::-1].index(end_id):]

    # -- one-shot
    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        message = self._params(request).parser.parse(model_output)
        reasoning = message.get("reasoning_content")
        split = reasoning_split(model_output, reasoning, self._end, self._start)
        before = ""
        if reasoning and self._start:  # text before the block (a call some templates write first)
            at = model_output.rfind(self._start, 0, max(model_output.find(reasoning), 0) + 1)
            before = model_output[:at] if at > 0 and model_output[:at].strip() else ""
        rest = before + model_output[split:]
        return reasoning or None, self._handover(align_to_content(rest, message.get("content")))

    def _handover(self, rest: str) -> str | None:
        """The text for the tool parser: the whitespace the template writes first in a turn (the
        tool parser, starting a turn, reads it as the template's), then ``rest``."""
        return self._prefix + rest if rest else None

    # -- streaming (engine based: each delta once, then finish_streaming)
    def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                    previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> DeltaMessage | None:
        if self._ended:
            return DeltaMessage(content=delta_text) if delta_text else None
        if self._stream is None:
            self._stream = ChunkStream(self._params().parser.stream(), self.ct.analysis)
        self._raw += delta_text
        return self._take(self._stream.feed(delta_text))

    def _take(self, chunks: list[dict[str, Any]]) -> DeltaMessage | None:
        reasoning = []
        for chunk in chunks:
            d = chunk["choices"][0]["delta"]
            if d.get("reasoning_content") and not self._ended:
                reasoning.append(d["reasoning_content"])
            elif d.get("content") or d.get("tool_calls"):
                if not self._ended:
                    self._content = d.get("content")
                self._ended = True
        self._reasoning += "".join(reasoning)
        return DeltaMessage(reasoning="".join(reasoning)) if reasoning else None

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._ended

    def finish_streaming(self) -> DeltaMessage | None:
        """At the reasoning's end: the text after it, as written (the tool parser reads it). At
        the end of an output whose reasoning never closed: what the parser read from the rest."""
        if self._flushed:
            return None
        if self._ended:
            self._flushed = True
            rest = self._raw[reasoning_split(self._raw, self._reasoning, self._end, self._start):]
            rest = self._handover(align_to_content(rest, self._content))
            return DeltaMessage(content=rest) if rest else None
        if self._stream is None:
            return None
        self._flushed = True
        return _delta(self._stream.finish())


# ----------------------------------------------------------------------------- tool parser

class AutoparserToolParser(ToolParser):
    """Tool calls by the template's analysis, with the request's tools (names checked, values
    typed by their schemas where the format writes text), ``tool_choice`` and
    ``parallel_tool_calls``; content around the calls kept. A call the model writes with no id
    gets one in the shape the template accepts, derived from the request's conversation
    (:func:`id_basis`): unique across the turns of a conversation."""

    engine_based_streaming = True
    # required / named tool_choice: our parser reads the template's own call format, and
    # adjust_request constrains the output with our grammar (vLLM's JSON list is not that format)
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self.ct = template_for(tokenizer)
        self._stream: ChunkStream | None = None
        # vLLM sets this when no reasoning parser is configured: reasoning is then content, as
        # written (its markers included), as vLLM does without one
        self.skip_reasoning_parsing = False
        self._in_reasoning = False

    def _params(self, request: Any) -> ChatParams:
        return request_params(self.ct, request, prompt=after_reasoning_prompt(self.ct),
                              chat_template_kwargs=_kwargs(request, None), basis=id_basis(request))

    def adjust_request(self, request: Any) -> Any:
        """Special tokens kept in the text; ``tool_choice="required"`` or a named tool: our
        grammar for the request in ``structured_outputs.grammar`` (unless a structured output is
        already set)."""
        return constrain(self.ct, keep_special_tokens(self.ct, request), after_reasoning=False)

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        message = self._params(request).parser.parse(model_output)
        calls = [ToolCall(id=c["id"], function=FunctionCall(name=c["function"]["name"],
                                                           arguments=c["function"]["arguments"]))
                 for c in message.get("tool_calls") or []]
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content")
        if reasoning:  # (no reasoning parser ran: the block as written, then the content)
            cs = self.ct.analysis.content_structure
            split = reasoning_split(model_output, reasoning, cs.reasoning_end.strip(), cs.reasoning_start.strip())
            content = model_output[:split] + content
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=content or None)

    def _as_content(self, delta: DeltaMessage | None, end: bool = False) -> DeltaMessage | None:
        """Reasoning read with no reasoning parser configured: content, between its markers."""
        cs = self.ct.analysis.content_structure
        out = ""
        if delta is not None and delta.reasoning:
            if not self._in_reasoning:
                out += cs.reasoning_start.strip()
                self._in_reasoning = True
            out += delta.reasoning
            delta.reasoning = None
        if self._in_reasoning and (end or delta is not None and (delta.content or delta.tool_calls)):
            out += cs.reasoning_end.strip()
            self._in_reasoning = False
        if not out:
            return delta
        if delta is None:
            delta = DeltaMessage()
        delta.content = out + (delta.content or "")
        return delta

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int], request: Any) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = ChunkStream(self._params(request).parser.stream(), self.ct.analysis)
        delta = _delta(self._stream.feed(delta_text)) if delta_text else None
        return self._as_content(delta) if delta is not None and self.skip_reasoning_parsing else delta

    def finish_streaming(self) -> DeltaMessage | None:
        if self._stream is None:
            return None
        stream, self._stream = self._stream, None
        delta = _delta(stream.finish())
        return self._as_content(delta, end=True) if self.skip_reasoning_parsing else delta


def keep_special_tokens(ct: ChatTemplate, request: Any) -> Any:
    """The request with ``skip_special_tokens`` off where the template has markers to read (they
    are often special tokens, which vLLM otherwise removes from the text before the parsers see
    it), as vLLM's own tool and reasoning parsers set it."""
    cs, ts = ct.analysis.content_structure, ct.analysis.tool_call_structure
    markers = cs.reasoning_start.strip() or cs.reasoning_end.strip() or (getattr(request, "tools", None) and ts.call_parts)
    if markers and hasattr(request, "skip_special_tokens"):
        request.skip_special_tokens = False
    return request


def constrain(ct: ChatTemplate, request: Any, *, after_reasoning: bool) -> Any:
    """The request with our grammar in ``structured_outputs`` for ``tool_choice="required"`` or a
    named tool (vLLM constrains the output after the reasoning when a reasoning parser is set:
    ``after_reasoning``). Requests with ``auto``, with no tools, or with a structured output of
    their own are left as they are."""
    tools = _plain_tools(request)
    if not tools or _choice(request, tools)[0] != "required" or getattr(request, "structured_outputs", None) is not None:
        return request
    params = request_params(ct, request, prompt=after_reasoning_prompt(ct) if after_reasoning else None,
                            chat_template_kwargs=_kwargs(request, None))
    try:
        grammar = params.lark_grammar
    except ChatAutoparserError:  # (no llguidance: the request runs unconstrained, as with 'auto')
        return request
    if grammar is None:
        return request
    request.structured_outputs = StructuredOutputsParams(grammar=grammar)
    if hasattr(request, "response_format"):
        request.response_format = None
    return request


def register() -> None:
    """Register both parsers under ``autoparser`` (vLLM's ``vllm.general_plugins`` entry point
    calls this; importing the module does it too, for ``--tool-parser-plugin FILE``)."""
    ToolParserManager.register_module(NAME, module=AutoparserToolParser)
    ReasoningParserManager.register_module(NAME, module=AutoparserReasoningParser)


register()
