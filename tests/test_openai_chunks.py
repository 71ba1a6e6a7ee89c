"""OpenAI chunks over the corpus: every rendered output of the fixed point, streamed through
:class:`chat_autoparser.generator.ChunkStream` in small pieces, gives chunks the ``openai`` package's own
``ChatCompletionChunk`` type accepts, a first ``role`` delta, every tool call with an id, type
and name in its first delta, ids equal to the one-shot message's, and deltas that add up to the
one-shot message; the finish reason is ``tool_calls``, ``stop``, or ``length`` when cut."""

from __future__ import annotations

import json

import pytest
from openai.types.chat import ChatCompletionChunk

from chat_autoparser.errors import ChatAutoparserError
from chat_autoparser.generator import ChunkStream, generate_parser
from chat_autoparser.generator.verify.fixed_point import RT_TOOLS

PIECE = 5  # characters a chunk of model text


def _accumulate(chunks: list[dict]) -> dict:
    """What a client builds from the deltas (text concatenated, calls by index)."""
    out: dict = {"content": "", "reasoning_content": "", "calls": {}}
    for c in chunks:
        d = c["choices"][0]["delta"]
        for key in ("content", "reasoning_content"):
            out[key] += d.get(key) or ""
        for tc in d.get("tool_calls") or ():
            call = out["calls"].setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if "id" in tc:
                assert call["id"] is None, f"call {tc['index']} got a second id"
                call["id"] = tc["id"]
                assert tc["type"] == "function" and tc["function"]["name"], f"first delta of a call: {tc}"
                call["name"] = tc["function"]["name"]
            else:
                assert call["id"] is not None, f"call {tc['index']} sent before its id"
            call["arguments"] += tc["function"].get("arguments", "")
    return out


def stream_chunks(analysis, r, *, cut: bool = False) -> tuple[list[dict], dict]:
    params = generate_parser(analysis, tools=RT_TOOLS if r.with_tools else None, enable_thinking=r.enable_thinking)
    s = ChunkStream(params.parser.stream(), analysis, completion_id="chatcmpl-test", created=0, model="m")
    text = r.generated
    chunks = [c for i in range(0, len(text), PIECE) for c in s.feed(text[i:i + PIECE])] + s.finish(cut=cut)
    return chunks, params.parser.parse(text)


def test_chunks_follow_the_openai_schema(corpus_entry, analyzed, fixed_points) -> None:
    analysis = analyzed(corpus_entry.path)
    if isinstance(analysis, ChatAutoparserError):
        pytest.skip("no analysis (its error is checked by test_golden)")
    cases = [(n, r) for n, r in fixed_points(corpus_entry.path).items() if not r.skipped and r.ok and r.generated]
    if not cases:
        pytest.skip("no rendered output passes the fixed point")
    for name, r in cases:
        chunks, message = stream_chunks(analysis, r)
        for c in chunks:
            ChatCompletionChunk.model_validate(c)
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant", name
        got = _accumulate(chunks)
        calls = message.get("tool_calls") or []
        assert [c["id"] for c in calls] == [got["calls"][i]["id"] for i in sorted(got["calls"])], name
        assert all(c["id"] for c in calls), name
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
            [(c["name"], json.loads(c["arguments"])) for _, c in sorted(got["calls"].items())], name
        assert got["content"] == (message.get("content") or ""), name
        assert got["reasoning_content"] == (message.get("reasoning_content") or ""), name
        assert chunks[-1]["choices"][0]["finish_reason"] == ("tool_calls" if calls else "stop"), name


def test_a_cut_output_finishes_with_length() -> None:
    from chat_autoparser.analyzer import analyze_template
    analysis = analyze_template("templates/chatml-think.jinja")
    s = ChunkStream(generate_parser(analysis).parser.stream(), analysis, created=0)
    s.feed("<think>\nstill thinking")
    last = s.finish(cut=True)[-1]
    ChatCompletionChunk.model_validate(last)
    assert last["choices"][0]["finish_reason"] == "length" and last["id"].startswith("chatcmpl-")
