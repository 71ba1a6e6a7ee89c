"""Parser speed per call format: ours against a pure-Python single-pass baseline, transformers and SGLang.

Run by hand (2-core machine: ~8 min a round for ``--format all`` with every peer)::

    python benchmarks/parse_speed.py [--format json|xml|prefixed|all] [--sizes 1000,10000,...]
                                     [--repeat N] [--no-hf] [--no-sglang] [--stream-runs N]
    python benchmarks/parse_speed.py --format xml --sizes 100000 --profile 15   # cProfile of ours

Formats, each read by the parser generated from a template's analysis:

* ``json``: JSON in tags (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, Qwen3 /
  Hermes), ``templates/chatml-think.jinja``, with ``<think>`` reasoning;
* ``xml``: XML arguments (``<function=NAME><parameter=KEY>VALUE</parameter>``, Qwen3-Coder,
  the form of Qwen3.5/3.6, MiniMax, GLM, Seed-OSS), the corpus' ``llama.cpp/Qwen3-Coder.jinja``;
* ``prefixed``: prefixed calls (``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>``
  JSON ``<|tool_call_end|>`` in a tool section, Kimi-K2), the corpus' ``llama.cpp/Kimi-K2-Instruct.jinja``.

The outputs are rendered by the template itself (the conversation ending with the assistant
message, less the prompt and the end of turn): about half the bytes are the text before the
calls (reasoning 40 % and content 10 % where the template reasons, else content), the rest
calls of about 250 bytes (a string with a space, an integer, an enum, a string with quotes,
a newline and non-ASCII). Every result is checked: our one-shot message has the reasoning,
content and calls (names, arguments) that were rendered, the streamed message equals it, the
single-pass baseline builds the same message (ids aside), and each peer reads the same reasoning,
content and calls. The script exits 1 only when a result is wrong; it makes no timed assertion.

Columns: median wall times (``--repeat`` runs the sizes again, round-robin, and takes the median
of all runs); streaming in 4-character chunks; ``µs/chunk`` the stream's time per chunk; ``p99``
the 99th percentile of single ``feed`` calls (each timed with ``perf_counter_ns`` in a run of
its own); ``× SP`` ours divided by the single-pass baseline (lower is better); ``HF ÷ ours`` and
``SGL ÷ ours`` the peer's time divided by ours (higher is better for us).

The single-pass baseline (``SP``; a baseline, not a bound: ours beats it on XML arguments one-shot) is
a hand-written single-pass ``str.find`` splitter for each format,
knowing that format's markers: it builds the same message (reasoning and content stripped, the
calls' arguments as JSON text: the model's own bytes for JSON arguments, validated by
``json.loads``; for XML arguments the values typed by the tool schema and ``json.dumps`` of the
dict, once per call; an id per call by our ``default_call_id``). Its streamed form keeps a buffer of the
text not yet read, searches each marker from where it stopped, holds back a marker cut by the
chunk's end and the whitespace that may end a field, and emits tuples for text and argument bytes
(XML values JSON-escaped as they come); a chunk inside a text field that cannot start its end
marker is emitted at once. Both assume the canonical form (no recovery).

Peers, called through their public APIs and alternating with our runs, so that a machine that
slows down for a while slows both:

* transformers' ``ResponseParser`` / ``parse_response`` (a test extra of this project), one
  response template per format (below: written for this benchmark after transformers' docs on
  ``xml-inline``; ``content`` repeats, or text around calls is overwritten). Its 1 MB stream copies
  its whole buffer on every chunk and takes 7-30 s a run: ``--hf-stream-max`` bounds it.
* SGLang's detectors (``Qwen25Detector`` after its ``Qwen3Detector`` reasoning parser,
  ``Qwen3CoderDetector``, ``KimiK2Detector``), optional. Its streamed detectors need each special
  token in one delta, as a tokenizer delivers it (cut, they lose text and calls): they get the
  same 4-character chunks except that the format's special tokens stay whole, fewer chunks than
  ours. SGLang is not a dependency of this project; to install it in the project's venv without
  torch (CPU-only, ~40 MB)::

      pip install --no-deps sglang==0.5.23 && pip install orjson msgspec psutil pybase64 ipython partial-json-parser

  (pydantic, openai and transformers come with ``.[test]``). ``import
  sglang`` itself needs torch; the benchmark loads only ``sglang.srt.function_call`` and
  ``sglang.srt.parser.reasoning_parser``, which do not, by registering the installed folder as
  a bare package. Without it the SGLang columns are skipped with a message.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import re
import statistics
import sys
import time
import tracemalloc
import types
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chat_autoparser.analyzer import analyze_template, load_template  # noqa: E402
from chat_autoparser.analyzer.caps import tool_call_messages, tool_forms  # noqa: E402
from chat_autoparser.analyzer.corpus import corpus_dir  # noqa: E402
from chat_autoparser.analyzer.limits import RenderLimits  # noqa: E402
from chat_autoparser.analyzer.prober import Prober  # noqa: E402
from chat_autoparser.generator import default_call_id, generate_parser  # noqa: E402
from chat_autoparser.generator.verify.fixed_point import generated_text, kwargs_for  # noqa: E402
from results import save  # noqa: E402 (benchmarks/results.py, beside this script)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "units": {"type": "string", "enum": ["metric", "imperial"]}, "notes": {"type": "string"}},
        "required": ["city"]}}}]
# JSON type of each parameter, per tool: what the XML single-pass baseline types values by
PARAM_TYPES = {t["function"]["name"]: {k: v.get("type", "string") for k, v in
                                       t["function"]["parameters"]["properties"].items()} for t in TOOLS}

WORDS = "the model considers each city and the forecast window before it answers carefully".split()


def _text(n: int, seed: int) -> str:
    out, i = [], seed
    while sum(map(len, out)) + len(out) < n:
        out.append(WORDS[i % len(WORDS)])
        i += 7
    return " ".join(out)[:n]


def call_args(k: int) -> dict[str, Any]:
    return {"city": f"{'Zürich' if k % 3 == 0 else 'City'} {k}", "days": k % 7 + 1,
            "units": ("metric", "imperial")[k % 2],
            "notes": f'{_text(70, k)} "quoted {k}"\n{_text(60, k + 1)}'}


# ---------------------------------------------------------------------------------------------
# transformers' response templates, one per format

HF_JSON = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close": "<|im_end|>", "content": "text", "repeats": True, "join": ""},
    },
}
HF_XML = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {"open_pattern": r"<tool_call>\s*<function=(?P<name>[^>\s]+)>", "close": "</tool_call>",
                       "repeats": True, "content": "xml-inline",
                       "content_args": {"tag_pattern": r"<parameter=(?P<key>[^>\s]+)>\n?(?P<value>.*?)\n?</parameter>"},
                       "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
        "content": {"close": "<|im_end|>", "content": "text", "repeats": True, "join": ""},
    },
}
HF_PREFIXED = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_assistant|>assistant<|im_middle|>",
    "fields": {
        "tool_calls": {
            "open_pattern": r"(?:<\|tool_calls_section_begin\|>)?<\|tool_call_begin\|>functions\.(?P<name>[^:<]+):\d+"
                            r"<\|tool_call_argument_begin\|>",
            "close": "<|tool_call_end|>", "repeats": True, "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
        # the section's end closes an empty content region: as an optional group after the call's
        # end (close_pattern), a stream cut between the two markers leaves it in the content
        "content": {"close": ["<|im_end|>", "<|tool_calls_section_end|>"], "content": "text", "repeats": True,
                    "join": ""},
    },
}


# ---------------------------------------------------------------------------------------------
# the single-pass baseline: single-pass str.find splitters, one-shot and streamed

THINK, THINK_END, CALL, CALL_END = "<think>", "</think>", "<tool_call>", "</tool_call>"
FUNC, FUNC_END, PARAM, VALUE_END = "<function=", "</function>", "<parameter=", "\n</parameter>"
SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
K_CALL, K_ARGS, K_CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
NAMESPACE = "functions."
WS = " \t\r\n"
CONVERT: dict[str, Callable[[str], Any]] = {"integer": int, "number": float}
for _m in (THINK, THINK_END, CALL, CALL_END, FUNC_END, VALUE_END, SECTION, SECTION_END, K_CALL, K_ARGS, K_CALL_END):
    assert _m[0] not in _m[1:], _m  # _partial relies on it


def _call(index: int, name: str, args: str, before: str) -> dict[str, Any]:
    return {"id": default_call_id(index, name, before), "type": "function", "function": {"name": name, "arguments": args}}


def _before(reasoning: str | None, content: str | None) -> str:
    """What a call's id hashes: each text's length and last 64 characters."""
    r, c = reasoning or "", content or ""
    return f"{len(r)}:{r[-64:]}\x00{len(c)}:{c[-64:]}"


def _message(reasoning: str | None, content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": content or None, "reasoning_content": reasoning or None,
            "tool_calls": calls}


def _head(text: str, marker: str, pos: int = 0) -> tuple[int, str]:
    """Where ``marker`` is (-1 if nowhere), and the text from ``pos`` to it, stripped."""
    i = text.find(marker, pos)
    return i, text[pos:i if i >= 0 else len(text)].strip()


def lb_json(text: str) -> dict[str, Any]:
    find, loads = text.find, json.loads
    reasoning, pos = None, 0
    if text.startswith(THINK):
        end = find(THINK_END)
        reasoning, pos = text[len(THINK):end].strip(), end + len(THINK_END)
    i, content = _head(text, CALL, pos)
    before, calls = _before(reasoning, content), []
    while i >= 0:
        j = find(CALL_END, i)
        body = text[i + len(CALL):j]
        name = loads(body)["name"]  # the call validated whole
        a = body.find(":", body.find('"arguments"')) + 1
        calls.append(_call(len(calls), name, body[a:body.rindex("}")].strip(), before))
        i, between = _head(text, CALL, j + len(CALL_END))
        if between:
            raise ValueError("text between calls")
    return _message(reasoning, content, calls)


def lb_xml(text: str) -> dict[str, Any]:
    find = text.find
    i, content = _head(text, CALL)
    before, calls = _before(None, content), []
    while i >= 0:
        f = find(FUNC, i) + len(FUNC)
        g = find(">", f)
        name, end = text[f:g], find(FUNC_END, g)
        types_, args = PARAM_TYPES[name], {}
        p = find(PARAM, g, end)
        while p >= 0:
            k = find(">", p)
            key, v = text[p + len(PARAM):k], k + 1 + (text[k + 1] == "\n")
            e = find(VALUE_END, v)
            conv = CONVERT.get(types_.get(key, "string"))
            args[key] = conv(text[v:e]) if conv else text[v:e]
            p = find(PARAM, e, end)
        calls.append(_call(len(calls), name, json.dumps(args, ensure_ascii=False), before))
        i, between = _head(text, CALL, find(CALL_END, end) + len(CALL_END))
        if between:
            raise ValueError("text between calls")
    return _message(None, content, calls)


def lb_prefixed(text: str) -> dict[str, Any]:
    find = text.find
    s, content = _head(text, SECTION)
    end, calls = find(SECTION_END, s), []
    i, before = find(K_CALL, s + len(SECTION), end), _before(None, content)
    while s >= 0 and i >= 0:
        a = find(K_ARGS, i)
        head = text[i + len(K_CALL):a].strip()
        name = head[len(NAMESPACE) if head.startswith(NAMESPACE) else 0:head.rindex(":")]
        e = find(K_CALL_END, a)
        args = text[a + len(K_ARGS):e].strip()
        json.loads(args)  # validated
        calls.append(_call(len(calls), name, args, before))
        i = find(K_CALL, e, end)
    if s >= 0 and text[end + len(SECTION_END):].strip():
        raise ValueError("text after the calls")
    return _message(None, content, calls)


def _partial(buf: str, marker: str, lo: int) -> int:
    """Where a marker cut by the end of ``buf`` may start (``len(buf)`` if nowhere): the
    marker's first character occurs once in it, so its last occurrence is the only candidate."""
    i = buf.rfind(marker[0], max(lo, len(buf) - len(marker) + 1))
    return i if i >= 0 and marker.startswith(buf[i:]) else len(buf)


class SinglePassStream:
    """Shared by the streamed single-pass baselines: the text not read yet, each field's pieces, and the
    text of a field emitted without its leading whitespace, its trailing whitespace held back
    until more text follows. Inside a text field (or arguments read as they are), a chunk that
    cannot start the field's end marker, with nothing held, is emitted at once."""

    fast: tuple[str, Any, list[str]] | None = None  # the end marker's first character, kind, pieces

    def __init__(self) -> None:
        self.buf, self.state, self.hold = "", self.START, ""
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[tuple[str, str, list[str]]] = []  # (id, name, argument pieces)
        self.key: tuple[int, int] | None = None
        self.before = ""

    def feed(self, chunk: str) -> list:
        fast = self.fast
        if fast is not None and not self.buf and fast[0] not in chunk:
            out: list = []
            self.say(out, fast[1], fast[2], chunk)
            return out
        return self.step(chunk)

    START, CONTENT_END, AFTER_CONTENT = "content", CALL, "call"

    def step(self, chunk: str) -> list:
        out: list = []
        buf, pos, go = self.buf + chunk, 0, True
        while go:
            st = self.state
            if st == "content":
                pos, go = self.text(out, buf, pos, self.CONTENT_END, st, self.content)
                if go:
                    self.state = self.AFTER_CONTENT
            else:
                buf, pos, go = self.read(st, out, buf, pos)
        self.buf, st = buf[pos:], self.state
        self.fast = ("<", st, self.content) if st == "content" else self.fast_for(st)
        return out

    def read(self, st: str, out: list, buf: str, pos: int) -> tuple[str, int, bool]:
        """Read on in state ``st`` from ``pos``: the buffer, where reading goes on, whether it can."""
        raise NotImplementedError

    def fast_for(self, st: str) -> tuple[str, Any, list[str]] | None:
        return None

    def say(self, out: list, kind: Any, pieces: list[str], text: str) -> None:
        if pieces and not self.hold and text and text[-1] not in WS:
            pieces.append(text)
            out.append((kind, text))
            return
        if not pieces:
            text = text.lstrip()
        body = text.rstrip()
        if body:
            body, self.hold = self.hold + body, text[len(body):]
            pieces.append(body)
            out.append((kind, body))
        elif pieces:
            self.hold += text

    def text(self, out: list, buf: str, pos: int, marker: str, kind: str, pieces: list[str]) -> tuple[int, bool]:
        """A text field up to ``marker``: where reading goes on, and whether the marker was found."""
        j = buf.find(marker, pos)
        if j < 0:
            k = _partial(buf, marker, pos)
            self.say(out, kind, pieces, buf[pos:k])
            return k, False
        self.say(out, kind, pieces, buf[pos:j])
        self.hold = ""
        return j + len(marker), True

    def arg(self, out: list, piece: str) -> None:
        self.args.append(piece)
        out.append(("args", len(self.calls) - 1, piece))

    def open_call(self, out: list, name: str) -> list[str]:
        key = (len(self.reasoning), len(self.content))
        if key != self.key:  # the texts changed since the last call
            self.key, self.before = key, _before("".join(self.reasoning), "".join(self.content))
        call = _call(len(self.calls), name, "", self.before)["id"]
        self.calls.append((call, name, []))
        out.append(("call", len(self.calls) - 1, name, call))
        return self.calls[-1][2]

    def finish(self) -> tuple[dict[str, Any], list]:
        out: list = []
        if self.buf and self.state in ("reasoning", "content"):
            self.say(out, self.state, self.reasoning if self.state == "reasoning" else self.content, self.buf)
        calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": "".join(a)}}
                 for i, n, a in self.calls]
        return _message("".join(self.reasoning), "".join(self.content), calls), out


class LbJsonStream(SinglePassStream):
    START, CONTENT_END = "start", CALL

    def read(self, st: str, out: list, buf: str, pos: int) -> tuple[str, int, bool]:
        if st == "start":
            if len(buf) < len(THINK) and THINK.startswith(buf):
                return buf, pos, False
            self.state = "reasoning" if buf.startswith(THINK) else "content"
            return buf, len(THINK) if self.state == "reasoning" else 0, True
        if st == "reasoning":
            pos, found = self.text(out, buf, pos, THINK_END, st, self.reasoning)
            if found:
                self.state = "content"
            return buf, pos, found
        if st == "call":  # until the arguments start; the call is kept whole, to be validated
            buf, pos = buf[pos:], 0
            a = buf.find('"arguments"')
            a = buf.find(":", a) + 1 if a >= 0 else 0
            if a <= 0:
                return buf, pos, False
            k = buf.find('"name"')
            q = buf.find('"', buf.find(":", k) + 1)
            self.args = self.open_call(out, buf[q + 1:buf.find('"', q + 1)])
            self.state, self.sent, self.scan = "args", a, a
            return buf, pos, True
        # arguments: up to the object's last brace before the call's end
        while not self.args and self.sent < len(buf) and buf[self.sent] in WS:
            self.sent += 1
        j = buf.find(CALL_END, self.scan)
        e = k = j if j >= 0 else _partial(buf, CALL_END, self.scan)
        while e > self.sent and buf[e - 1] in "} \t\r\n":  # the object's brace may be among them
            e -= 1
        if j >= 0:
            json.loads(buf[:j])  # the call validated whole
            e = buf.rindex("}", self.sent, j)
            while e > self.sent and buf[e - 1] in WS:
                e -= 1
        if e > self.sent:
            self.arg(out, buf[self.sent:e])
            self.sent = e
        if j < 0:
            self.scan = k
            return buf, pos, False
        self.state = "content"
        return buf, j + len(CALL_END), True

    def fast_for(self, st: str) -> tuple[str, Any, list[str]] | None:
        return ("<", st, self.reasoning) if st == "reasoning" else None


class LbXmlStream(SinglePassStream):
    def read(self, st: str, out: list, buf: str, pos: int) -> tuple[str, int, bool]:
        if st == "call":  # <function=NAME>
            f = buf.find(FUNC, pos)
            g = buf.find(">", f + len(FUNC)) if f >= 0 else -1
            if g < 0:
                return buf, pos, False
            name = buf[f + len(FUNC):g].strip()
            self.args, self.types, self.n = self.open_call(out, name), PARAM_TYPES.get(name, {}), 0
            self.state = "params"
            return buf, g + 1, True
        if st == "params":  # <parameter=KEY> or </function>
            p = buf.find("<", pos)
            if p < 0:
                return buf, len(buf), False
            if buf.startswith(PARAM, p):
                g = buf.find(">", p)
                if g < 0:
                    return buf, p, False
                key = buf[p + len(PARAM):g]
                self.conv = CONVERT.get(self.types.get(key, "string"))
                self.arg(out, ("{" if not self.n else ", ") + encode_basestring(key) + (": " if self.conv else ': "'))
                self.n += 1
                self.state, self.first = "value", True
                return buf, g + 1, True
            if buf.startswith(FUNC_END, p):
                self.arg(out, "}" if self.n else "{}")
                self.state = "close"
                return buf, p + len(FUNC_END), True
            return buf, p, False
        if st == "value":  # "\n" VALUE "\n</parameter>"
            if self.first:
                if pos >= len(buf):
                    return buf, pos, False
                pos += buf[pos] == "\n"
                self.first = False
            j = buf.find(VALUE_END, pos)
            if j < 0:
                if not self.conv:  # a string: its escaped text as it comes
                    k = _partial(buf, VALUE_END, pos)
                    if k > pos:
                        self.arg(out, encode_basestring(buf[pos:k])[1:-1])
                    pos = k
                return buf, pos, False
            self.arg(out, json.dumps(self.conv(buf[pos:j])) if self.conv else encode_basestring(buf[pos:j])[1:])
            self.state = "params"
            return buf, j + len(VALUE_END), True
        j = buf.find(CALL_END, pos)  # </tool_call>
        if j < 0:
            return buf, _partial(buf, CALL_END, pos), False
        self.state = "content"
        return buf, j + len(CALL_END), True


class LbPrefixedStream(SinglePassStream):
    CONTENT_END, AFTER_CONTENT = SECTION, "section"

    def read(self, st: str, out: list, buf: str, pos: int) -> tuple[str, int, bool]:
        if st == "section":  # the next call, or the section's end
            p = buf.find("<", pos)
            if buf.startswith(K_CALL, p):
                self.state = "head"
                return buf, p + len(K_CALL), True
            if buf.startswith(SECTION_END, p):
                self.state = "after"
                return buf, p + len(SECTION_END), True
            if p >= 0 and len(buf) - p < len(SECTION_END):
                return buf, p, False
            if buf[pos:].strip():
                raise ValueError("not a call")
            return buf, len(buf), False
        if st == "head":  # functions.NAME:INDEX
            a = buf.find(K_ARGS, pos)
            if a < 0:
                return buf, pos, False
            head = buf[pos:a].strip()
            name = head[len(NAMESPACE) if head.startswith(NAMESPACE) else 0:head.rindex(":")]
            self.args, self.state = self.open_call(out, name), "args"
            return buf, a + len(K_ARGS), True
        if st == "args":
            pos, found = self.text(out, buf, pos, K_CALL_END, ("args", len(self.calls) - 1), self.args)
            if found:
                json.loads("".join(self.args))  # validated
                self.state = "section"
            return buf, pos, found
        if buf[pos:].strip():  # after the section
            raise ValueError("text after the calls")
        return buf, len(buf), False

    def fast_for(self, st: str) -> tuple[str, Any, list[str]] | None:
        return ("<", ("args", len(self.calls) - 1), self.args) if st == "args" else None


# ---------------------------------------------------------------------------------------------
# formats, outputs, parsers

# (generous: the outputs are large, and parse_instructions runs this under valgrind, 20-50x slower)
LIMITS = RenderLimits(timeout_s=120, analysis_timeout_s=3600, compile_timeout_s=120, max_output_chars=10 ** 8,
                      max_iterations=10 ** 8, max_value_size=10 ** 8, max_value_nodes=10 ** 8)


@dataclass
class Format:
    name: str
    title: str
    template: str  # under the repository, or "corpus:" and a path in the corpus
    calls_start: str  # the marker that opens the calls
    hf_template: dict[str, Any] | None
    sglang: tuple[str, str, str | None]  # detector module, class, reasoning detector class
    lb_one: Callable[[str], dict[str, Any]]
    lb_stream: type
    specials: tuple[str, ...]  # the markers that are special tokens in the model's vocabulary

    @cached_property
    def path(self) -> Path:
        if self.template.startswith("corpus:"):
            return corpus_dir() / self.template.removeprefix("corpus:")
        return ROOT / self.template

    @cached_property
    def loaded(self):
        return load_template(self.path)

    @cached_property
    def analysis(self):
        return analyze_template(self.loaded, limits=LIMITS)

    @cached_property
    def reasons(self) -> bool:
        return bool(self.analysis.content_structure.reasoning_end)

    @cached_property
    def parser(self):
        return generate_parser(self.analysis, tools=TOOLS, enable_thinking=True).parser

    @cached_property
    def prober(self) -> Prober:
        prober = Prober(self.loaded, engine=self.analysis.engine, limits=LIMITS)
        prober.content_format = self.analysis.caps.content_format
        return prober

    def render(self, reasoning: str | None, content: str, n_calls: int) -> str:
        """What the model generates for that message, as the template writes it."""
        calls = [("get_weather", call_args(k), None) for k in range(n_calls)]
        extra = {"reasoning_content": reasoning} if reasoning else {}
        msg = tool_call_messages(tool_forms(self.analysis.caps), calls, content=content, **extra)
        cut = generated_text(self.prober, msg, TOOLS, kwargs_for(self.analysis, True))
        if cut is None:
            raise SystemExit(f"{self.path.name}: the template does not render the output ({self.prober.failures})")
        text, eot = cut[1].rstrip(), self.analysis.end_of_turn.strip()
        return text[:-len(eot)] if eot and text.endswith(eot) else text

    @cached_property
    def bytes_per_call(self) -> float:
        return (len(self.render(None, "x", 11)) - len(self.render(None, "x", 1))) / 10


FORMATS = {
    "json": Format("json", "JSON in tags", "templates/chatml-think.jinja", CALL, HF_JSON,
                   ("qwen25_detector", "Qwen25Detector", "Qwen3Detector"), lb_json, LbJsonStream,
                   (THINK, THINK_END, CALL, CALL_END)),
    "xml": Format("xml", "XML arguments", "corpus:llama.cpp/Qwen3-Coder.jinja", CALL, HF_XML,
                  ("qwen3_coder_detector", "Qwen3CoderDetector", None), lb_xml, LbXmlStream, (CALL, CALL_END)),
    "prefixed": Format("prefixed", "prefixed calls", "corpus:llama.cpp/Kimi-K2-Instruct.jinja", SECTION, HF_PREFIXED,
                       ("kimik2_detector", "KimiK2Detector", None), lb_prefixed, LbPrefixedStream,
                       (SECTION, SECTION_END, K_CALL, K_ARGS, K_CALL_END)),
}


@dataclass
class Sample:
    text: str
    reasoning: str | None  # what must be read back (stripped)
    content: str
    calls: list[tuple[str, dict[str, Any]]]


def make_output(fmt: str, size: int) -> Sample:
    """An output of about ``size`` bytes in format ``fmt``, rendered by its template."""
    f = FORMATS[fmt]
    reasoning = _text(int(size * 0.4), 1) if f.reasons else None
    content = _text(int(size * 0.1) if f.reasons else size // 2, 3)
    n = max(1, round((size - size // 2) / f.bytes_per_call))
    text = f.render(reasoning, content, n)
    return Sample(text, reasoning.strip() if reasoning else None, content.strip(),
                  [("get_weather", call_args(k)) for k in range(n)])


def chunks_of(text: str, n: int = 4) -> list[str]:
    return [text[i:i + n] for i in range(0, len(text), n)]


def token_chunks(text: str, specials: tuple[str, ...], n: int = 4) -> list[str]:
    """``n``-character chunks, except that no special token is cut: each is a chunk of its own,
    as a tokenizer delivers it."""
    out, pattern = [], re.compile("(" + "|".join(map(re.escape, specials)) + ")")
    for k, part in enumerate(pattern.split(text)):
        out.extend([part] if k % 2 else chunks_of(part, n))
    return out


# ---------------------------------------------------------------------------------------------
# checks

def problems(msg: dict[str, Any], sample: Sample, exact: bool) -> list[str]:
    """How ``msg`` differs from what was rendered; ``exact``: text fields as they are (ours), else
    stripped and "" for None (peers)."""
    out = []

    def norm(v: Any) -> Any:
        return v if exact else (v or "").strip() or None

    reasoning = msg.get("reasoning_content", msg.get("thinking"))
    if norm(reasoning) != sample.reasoning:
        out.append(f"reasoning {str(reasoning)[:60]!r}... != {str(sample.reasoning)[:60]!r}...")
    if norm(msg.get("content")) != (sample.content or None):
        out.append(f"content {str(msg.get('content'))[:60]!r}... != {sample.content[:60]!r}...")
    calls = msg.get("tool_calls") or []
    if len(calls) != len(sample.calls):
        out.append(f"{len(calls)} calls, {len(sample.calls)} expected")
    for k, (call, (name, args)) in enumerate(zip(calls, sample.calls)):
        fn = call["function"]
        got = fn["arguments"]
        if exact and not isinstance(got, str):
            out.append(f"call {k}: arguments not JSON text")
            break
        try:
            got = json.loads(got) if isinstance(got, str) else got
        except ValueError:
            got = None
        if fn["name"] != name or got != args:
            out.append(f"call {k}: {fn['name']} {got!r} != {name} {args!r}")
            break
    if exact and "parse_error" in msg:
        out.append(f"parse error {msg['parse_error']}")
    return out


def without_ids(msg: dict[str, Any]) -> dict[str, Any]:
    return {**msg, "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in msg.get("tool_calls") or []]}


# ---------------------------------------------------------------------------------------------
# the contestants: (one-shot, stream) for each

def streamed(make: Callable[[], Any]) -> Callable[[list[str]], dict]:
    """Feeds the chunks to a new stream of ``make``; the message it finishes with."""
    def stream(chunks: list[str]) -> dict:
        s = make()
        for c in chunks:
            s.feed(c)
        return s.finish()[0]
    return stream


def ours(f: Format):
    return f.parser.parse, streamed(f.parser.stream)


def single_pass(f: Format):
    return f.lb_one, streamed(f.lb_stream)


def hf(f: Format):
    try:
        from transformers.utils.chat_parsing.response_parser import ResponseParser, parse_response
    except ImportError:
        return None

    def one_shot(text: str) -> dict:
        return parse_response(text, f.hf_template, prefix="", tools=TOOLS)

    def stream(chunks: list[str]) -> dict:
        p = ResponseParser(f.hf_template, prefix="", tools=TOOLS)
        for c in chunks:
            p.feed(c)
        return p.finalize()[0]
    return one_shot, stream


def _sglang_modules() -> tuple[Any, Any] | str:
    """SGLang's function-call and reasoning modules, or why they do not import."""
    if "sglang" not in sys.modules:  # sglang/__init__.py imports torch: the bare folder is enough here
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            return "sglang is not installed"
        pkg = types.ModuleType("sglang")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["sglang"] = pkg
    try:
        import sglang.srt.function_call as fc
        from sglang.srt.parser import reasoning_parser
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        return f"sglang does not import: {type(e).__name__}: {e}"
    return fc, reasoning_parser


def sglang(f: Format):
    mods = _sglang_modules()
    if isinstance(mods, str):
        return mods
    module, cls, reasoning_cls = f.sglang
    from sglang.srt.entrypoints.openai.protocol import Tool
    detector = getattr(importlib.import_module(f"sglang.srt.function_call.{module}"), cls)
    reasoner = getattr(mods[1], reasoning_cls) if reasoning_cls else None
    tools = [Tool(**t) for t in TOOLS]

    def message(reasoning: str | None, content: str, calls: list[list]) -> dict:
        return {"role": "assistant", "reasoning_content": reasoning, "content": content, "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": "".join(a)}} for n, a in calls]}

    def one_shot(text: str) -> dict:
        reasoning = None
        if reasoner is not None:
            r = reasoner().detect_and_parse(text)
            reasoning, text = r.reasoning_text, r.normal_text
        res = detector().detect_and_parse(text, tools)
        return message(reasoning, res.normal_text, [[c.name, [c.parameters]] for c in res.calls])

    def stream(chunks: list[str]) -> dict:
        rd, td = reasoner() if reasoner is not None else None, detector()
        reasoning: list[str] = []
        content: list[str] = []
        calls: dict[int, list] = {}

        def tool_text(text: str) -> None:
            res = td.parse_streaming_increment(text, tools)
            if res.normal_text:
                content.append(res.normal_text)
            for c in res.calls:
                slot = calls.setdefault(c.tool_index, [None, []])
                if c.name:
                    slot[0] = c.name
                if c.parameters:
                    slot[1].append(c.parameters)

        for c in chunks:
            if rd is not None:
                r = rd.parse_streaming_increment(c)
                if r.reasoning_text:
                    reasoning.append(r.reasoning_text)
                c = r.normal_text
                if not c:
                    continue
            tool_text(c)
        if rd is not None:
            r = rd.finish()
            reasoning.append(r.reasoning_text or "")
            if r.normal_text:
                tool_text(r.normal_text)
        res = td.finish(tools)
        content.append(res.normal_text)
        return message("".join(reasoning) if rd is not None else None, "".join(content),
                       [calls[k] for k in sorted(calls)])
    return one_shot, stream


# ---------------------------------------------------------------------------------------------
# timing

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def alternate(fns: dict[str, Callable[[], Any] | None], runs: int, times: dict[str, list[float]]) -> dict[str, Any]:
    """``runs`` runs of each of ``fns`` in turn (after a ``gc.collect()``); appends each wall
    time to ``times[name]`` and returns each one's last result."""
    results: dict[str, Any] = {}
    gc.collect()
    for _ in range(runs):
        for name, fn in fns.items():
            if fn is not None:
                t, results[name] = timed(fn)
                times.setdefault(name, []).append(t)
    return results


def feed_times(make: Callable[[], Any], chunks: list[str]) -> list[int]:
    """Nanoseconds of each ``feed`` of one streaming run."""
    s, out, clock = make(), [], time.perf_counter_ns
    for c in chunks:
        t = clock()
        s.feed(c)
        out.append(clock() - t)
    s.finish()
    return out


def p99(ns: list[int]) -> float:
    return sorted(ns)[min(len(ns) - 1, int(len(ns) * 0.99))] / 1000


def runs_for(size: int) -> int:
    return 21 if size <= 10_000 else 7 if size <= 100_000 else 3


@dataclass
class Row:
    size: int = 0
    calls: int = 0
    chunks: int = 0
    peak: int = 0
    one: dict[str, list[float]] = field(default_factory=dict)     # who -> one-shot wall times
    stream: dict[str, list[float]] = field(default_factory=dict)  # who -> stream wall times
    p99: dict[str, list[float]] = field(default_factory=dict)     # who -> per-chunk p99 (µs)
    wrong: dict[str, str] = field(default_factory=dict)           # peer -> what it read wrong


def fail(msg: str) -> None:
    print(f"WRONG RESULT: {msg}", file=sys.stderr)
    raise SystemExit(1)


def measure(f: Format, size: int, row: Row, peers: dict[str, Any], stream_runs: int, hf_stream_max: int) -> None:
    sample = make_output(f.name, size)
    text, chunks = sample.text, chunks_of(sample.text)
    feeds = {"sglang": token_chunks(text, f.specials)}  # SGLang's detectors need special tokens whole
    row.size, row.calls, row.chunks = len(text), len(sample.calls), len(chunks)
    contestants = {"ours": ours(f), "lb": single_pass(f), **{k: v for k, v in peers.items() if v}}
    one = alternate({k: (lambda fn=v[0]: fn(text)) for k, v in contestants.items()}, runs_for(size), row.one)
    stream = alternate({k: (lambda fn=v[1], c=feeds.get(k, chunks): fn(c)) if k != "hf" or size <= hf_stream_max
                        else None for k, v in contestants.items()}, stream_runs, row.stream)
    if p := problems(one["ours"], sample, exact=True):
        fail(f"{f.name}, {len(text):,} bytes, ours one-shot: {p[0]}")
    if stream["ours"] != one["ours"]:
        fail(f"{f.name}, {len(text):,} bytes: our streamed message differs from the one-shot message")
    for kind, got in (("one-shot", one["lb"]), ("streamed", stream["lb"])):
        if without_ids(got) != without_ids(one["ours"]):
            fail(f"{f.name}, {len(text):,} bytes: the {kind} single-pass baseline's message differs from ours "
                 f"({(problems(got, sample, exact=True) or ['ids aside'])[0]})")
    for who in peers:
        for kind, res in (("one-shot", one), ("stream", stream)):
            if who in res and (p := problems(res[who], sample, exact=False)):
                row.wrong.setdefault(who, f"{kind} at {len(text):,} bytes: {p[0]}")
    for who, make in (("ours", f.parser.stream), ("lb", f.lb_stream)):
        row.p99.setdefault(who, []).append(p99(feed_times(make, chunks)))
    if not row.peak:
        tracemalloc.start()
        contestants["ours"][1](chunks)
        row.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


# ---------------------------------------------------------------------------------------------
# report

def med(xs: list[float] | None) -> float | None:
    return statistics.median(xs) if xs else None


def ms(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x * 1e3:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.1f}"


def report(f: Format, rows: list[Row], peers: dict[str, Any]) -> None:
    print(f"\n### {f.title} ({f.name}): {f.path.name}\n")
    print("| bytes | calls | one-shot ms | SP ms | × SP | stream ms | SP stream ms | × SP | µs/chunk "
          "| p99 µs | SP p99 µs | stream peak KiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        o, lb, s, ls = med(r.one["ours"]), med(r.one["lb"]), med(r.stream["ours"]), med(r.stream["lb"])
        print(f"| {r.size:,} | {r.calls} | {ms(o)} | {ms(lb)} | {ratio(o, lb)} | {ms(s, 1)} | {ms(ls, 1)} "
              f"| {ratio(s, ls)} | {s / r.chunks * 1e6:.2f} | {med(r.p99['ours']):.1f} | {med(r.p99['lb']):.1f} "
              f"| {r.peak / 1024:,.0f} |")
    names = {"hf": "HF", "sglang": "SGL"}
    active = [k for k in names if peers.get(k)]
    if active:
        head = "".join(f" {names[k]} one-shot ms | {names[k]} stream ms | {names[k]} ÷ ours one-shot "
                       f"| {names[k]} ÷ ours stream |" for k in active)
        print(f"\n| bytes |{head}")
        print("|---:|" + "---:|---:|---:|---:|" * len(active))
        for r in rows:
            cells = ""
            for k in active:
                o1, s1 = med(r.one.get(k)), med(r.stream.get(k))
                cells += (f" {ms(o1)} | {ms(s1, 1)} | {ratio(o1, med(r.one['ours']))} "
                          f"| {ratio(s1, med(r.stream['ours']))} |")
            print(f"| {r.size:,} |{cells}")
    for k in active:
        wrong = [r.wrong[k] for r in rows if k in r.wrong]
        if wrong:
            print(f"\n{names[k]} read wrongly ({len(wrong)} sizes), e.g. {wrong[0]}")


def summary(results: dict[str, list[Row]], peers: dict[str, dict[str, Any]]) -> None:
    """Targets of issue 15 at 100 KB and 1 MB (rows within 10 % of those sizes)."""
    print("\n### Summary: ours ÷ single-pass baseline (targets: one-shot ≤ 2, stream ≤ 3), peers ÷ ours (targets: > 1), "
          "p99 per chunk (target: < 20 µs at 1 MB)\n")
    print("| format | bytes | one-shot × SP | stream × SP | p99 µs | HF ÷ ours one-shot | HF ÷ ours stream "
          "| SGL ÷ ours one-shot | SGL ÷ ours stream |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        for r in rows:
            if not any(abs(r.size - t) <= t // 10 for t in (100_000, 1_000_000)):
                continue
            o, s = med(r.one["ours"]), med(r.stream["ours"])
            print(f"| {name} | {r.size:,} | {ratio(o, med(r.one['lb']))} | {ratio(s, med(r.stream['lb']))} "
                  f"| {med(r.p99['ours']):.1f} | {ratio(med(r.one.get('hf')), o)} "
                  f"| {ratio(med(r.stream.get('hf')), s)} "
                  f"| {ratio(med(r.one.get('sglang')), o)} | {ratio(med(r.stream.get('sglang')), s)} |")


def saved_row(r: Row) -> dict[str, Any]:
    """One size's medians as ``--save`` keeps them: seconds one-shot and streamed per contestant
    (``lb`` the single-pass baseline), the p99 of a chunk in µs, and who read the output wrongly."""
    return {"bytes": r.size, "calls": r.calls, "chunks": r.chunks, "stream_peak_bytes": r.peak,
            "one_shot_s": {k: med(v) for k, v in r.one.items()},
            "stream_s": {k: med(v) for k, v in r.stream.items()},
            "p99_us": {k: med(v) for k, v in r.p99.items()}, "wrong": dict(r.wrong)}


def profile(names: list[str], sizes: list[int], top: int) -> None:
    """cProfile of our one-shot and streamed parse (5 runs each): the ``top`` functions by own and by
    cumulative time."""
    import cProfile
    import pstats
    for name in names:
        f = FORMATS[name]
        one, stream = ours(f)
        for size in sizes:
            text = make_output(name, size).text
            for kind, run in (("one-shot", lambda: one(text)), ("stream", lambda: stream(chunks_of(text)))):
                run()
                gc.collect()
                prof = cProfile.Profile()
                for _ in range(5):  # summed over runs: a collection of the GC counts in one of them only
                    prof.runcall(run)
                for key in ("tottime", "cumulative"):
                    print(f"\n### {name}, {len(text):,} bytes, {kind}: top {top} by {key}\n", flush=True)
                    pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=[*FORMATS, "all"], default="all")
    ap.add_argument("--sizes", default="1000,10000,100000,300000,1000000")
    ap.add_argument("--repeat", type=int, default=1, help="measure every size this many times, round-robin")
    ap.add_argument("--no-hf", action="store_true", help="skip transformers (its 1 MB stream takes 7-30 s a run)")
    ap.add_argument("--no-sglang", action="store_true", help="skip SGLang's detectors")
    ap.add_argument("--hf-stream-max", type=int, default=1_000_000, help="largest size streamed through transformers")
    ap.add_argument("--stream-runs", type=int, default=3, help="streaming runs per size (each side)")
    ap.add_argument("--profile", type=int, metavar="TOP", help="print cProfile's TOP functions of our parse instead")
    ap.add_argument("--save", action="store_true", help="keep the figures in benchmarks/results/parse_speed.json")
    args = ap.parse_args(argv)
    names = list(FORMATS) if args.format == "all" else [args.format]
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.profile:
        profile(names, sizes, args.profile)
        return 0
    peers: dict[str, dict[str, Any]] = {}
    for name in names:
        f = FORMATS[name]
        peers[name] = {"hf": None if args.no_hf else hf(f), "sglang": None if args.no_sglang else sglang(f)}
        if isinstance(peers[name]["sglang"], str):
            print(f"SGLang skipped: {peers[name]['sglang']}", file=sys.stderr)
            peers[name]["sglang"] = None
    results = {name: [Row() for _ in sizes] for name in names}
    for rep in range(args.repeat):
        for name in names:
            for size, row in zip(sizes, results[name]):
                print(f"[{rep + 1}/{args.repeat}] {name} {size:,} bytes", file=sys.stderr, flush=True)
                measure(FORMATS[name], size, row, peers[name], args.stream_runs, args.hf_stream_max)
    print(f"Streaming in 4-character chunks; medians of {args.repeat} round(s); SP: the single-pass single-pass baseline.")
    for name in names:
        report(FORMATS[name], results[name], peers[name])
    summary(results, peers)
    if args.save:
        kept = {"repeat": args.repeat, "stream_runs": args.stream_runs, "sglang": any(p["sglang"] for p in peers.values()),
                "hf": not args.no_hf, "formats": {name: [saved_row(r) for r in rows] for name, rows in results.items()}}
        print(f"saved to {save('parse_speed', [a for a in (argv if argv is not None else sys.argv[1:]) if a != '--save'], kept)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
