"""OpenAI Chat Completions streaming shape: chunks of model text in, ``chat.completion.chunk``
dicts out (``choices[0].delta``: a first ``role`` delta, then ``content``, ``reasoning_content``
and ``tool_calls[i]`` pieces: ``index``, ``id``, ``type``, ``function.name`` once, then argument
pieces), and a last chunk with the ``finish_reason`` (``tool_calls``, ``stop``, or ``length``
when the caller says the output was cut).

Every tool call carries an id when it is first sent: the model's own, else the parser's id
factory's (deterministic by default, the same as in the one-shot message). A format that may
write a call's id after its arguments (a JSON object with an id key) has each call's pieces held
until the call is read whole, so the id sent is the final one (OpenAI clients concatenate the
string pieces of a call, an id sent twice would be two ids run together).

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> from chat_autoparser.generator import generate_parser
    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> s = ChunkStream(generate_parser(a).parser.stream(), a, completion_id="chatcmpl-1", created=0, model="m")
    >>> [c["choices"][0]["delta"] for c in s.feed("<think>\\nhm\\n</think>\\nHi")]
    [{'role': 'assistant', 'content': ''}, {'reasoning_content': 'hm'}, {'content': 'Hi'}]
    >>> s.finish()[-1]["choices"][0]
    {'index': 0, 'delta': {}, 'logprobs': None, 'finish_reason': 'stop'}
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from chat_autoparser.analyzer.structures import FunctionFormat, TemplateAnalysis
from chat_autoparser.analyzer.walk import PartKind, split_at

from .assemble import as_delta

FinishReason = Literal["stop", "length", "tool_calls"]


def id_may_follow_arguments(analysis: TemplateAnalysis) -> bool:
    """Whether a call's id may be read after its arguments have begun (the skeleton writes it
    after them, or a JSON object has an id key: the model chooses the keys' order), so that a
    call announced early could change its id (the stream's ``region_update`` event)."""
    ts = analysis.tool_call_structure
    _, args, after = split_at(ts.call_parts, PartKind.ARGS)
    if args is not None and any(p.kind == PartKind.ID.value for p in after):
        return True
    return ts.function_format == FunctionFormat.JSON_OBJECT and bool(ts.id_field)


def _merge(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive text pieces of one field, and argument pieces of one call, as one delta."""
    out: list[dict[str, Any]] = []
    for d in deltas:
        last = out[-1] if out else None
        if last is not None and len(d) == 1 and set(d) == set(last) and next(iter(d)) in ("content",
                                                                                           "reasoning_content"):
            key = next(iter(d))
            last[key] += d[key]
            continue
        if last is not None and set(d) == set(last) == {"tool_calls"}:
            a, b = last["tool_calls"][0], d["tool_calls"][0]
            if a["index"] == b["index"] and set(b) == {"index", "function"} and set(b["function"]) == {"arguments"}:
                a["function"]["arguments"] += b["function"]["arguments"]
                continue
        out.append(d)
    return out


class ChunkStream:
    """A message stream (``MessageParser.stream()``) turned into ``chat.completion.chunk`` dicts.

    ``feed(text)`` returns the chunks that text completes; ``finish(cut=False)`` the rest and
    the last chunk, with the finish reason; ``message`` is then the one-shot message."""

    def __init__(self, stream: Any, analysis: TemplateAnalysis, *, completion_id: str | None = None,
                 model: str = "", created: int | None = None) -> None:
        self.stream = stream
        self.id = completion_id or f"chatcmpl-{uuid.uuid4().hex}"
        self.model = model
        self.created = int(time.time()) if created is None else created
        self.hold = id_may_follow_arguments(analysis)
        self.message: dict[str, Any] | None = None
        self._started = False
        self._held: dict[int, list[dict[str, Any]]] = {}

    def chunk(self, delta: dict[str, Any], finish_reason: FinishReason | None = None) -> dict[str, Any]:
        """One ``chat.completion.chunk`` with ``delta``."""
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    def _deltas(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            out.append({"role": "assistant", "content": ""})
        for ev in events:
            if self.hold and ev.get("field") == "tool_calls":
                if ev["type"] == "region_update":  # the call is held: its announcement takes the id
                    self._held[ev["index"]][0]["tool_calls"][0]["id"] = ev["id"]
                    continue
                if ev["type"] == "region_close":
                    out.extend(self._held.pop(ev["index"], []))
                    continue
                d = as_delta(ev)
                if d is not None:
                    self._held.setdefault(ev["index"], []).append(d)
                continue
            d = as_delta(ev)
            if d is not None:
                out.append(d)
        return out

    def feed(self, text: str) -> list[dict[str, Any]]:
        """The chunks ``text`` (the next piece of model output) completes."""
        return [self.chunk(d) for d in _merge(self._deltas(self.stream.feed(text)))]

    def finish(self, *, cut: bool = False) -> list[dict[str, Any]]:
        """The last chunks: what the end of the output completes, then the finish reason
        (``length`` when ``cut``: the output stopped at a token limit)."""
        self.message, events = self.stream.finish()
        deltas = self._deltas(events)
        for held in self._held.values():  # calls never closed (the output was cut)
            deltas.extend(held)
        self._held = {}
        reason: FinishReason = "length" if cut else "tool_calls" if self.message.get("tool_calls") else "stop"
        return [self.chunk(d) for d in _merge(deltas)] + [self.chunk({}, reason)]
