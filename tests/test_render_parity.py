"""Rendering parity: our jinja2 engine against transformers' own ``apply_chat_template``.

For every template of the corpus and every conversation in :data:`CONVERSATIONS`,
``ChatTemplate.render`` (our ``jinja2`` engine) must produce exactly the string transformers 5.x produces with
``apply_chat_template(..., tokenize=False)``, or both must refuse the input in the same way
(syntax error vs syntax error, ``raise_exception`` with the same message, other run-time
error vs other run-time error).

transformers is a test-only dependency; no torch is needed: the tokenizer is built offline
from a three-word ``WordLevel`` vocabulary, with the same special tokens our loader supplies.

The helpers here (conversations, both render paths, the outcome comparison) are also used
by ``benchmarks/render_parity.py``, which reports the same comparison for minijinja.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from chat_autoparser.analyzer import load_template
from chat_autoparser.analyzer.corpus import CorpusEntry
from chat_autoparser.errors import RenderError, RenderLimitError, TemplateError, TemplateRaised
from chat_autoparser.analyzer.load import SPECIAL_TOKEN_KEYS, LoadedTemplate, from_string
from chat_autoparser.analyzer.render import template_special_tokens
from chat_autoparser.generator import ChatTemplate

# Pinned on both sides: several templates print today's date (Llama 3.x, Granite, ...).
FIXED_NOW = datetime(2025, 3, 14, 9, 26, 53)


# --------------------------------------------------------------------------- conversations

def _tool(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": f"Look up the {name.split('_')[-1]}.",
        "parameters": {"type": "object", "properties": props, "required": required}}}


TOOLS = [
    _tool("get_weather", {"location": {"type": "string", "description": "City name"},
                          "unit": {"type": "string", "description": "Temperature unit",
                                   "enum": ["celsius", "fahrenheit"]}}, ["location"]),
    _tool("get_time", {"timezone": {"type": "string", "description": "IANA zone"}}, ["timezone"]),
]


def _call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


@dataclass(frozen=True)
class Conversation:
    """One render input: messages plus everything else ``apply_chat_template`` takes."""

    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    documents: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)


CONVERSATIONS: tuple[Conversation, ...] = (
    # The input nearly every template accepts (strict alternation, no system role, ...).
    Conversation("single_user", [{"role": "user", "content": "Hi!"}], add_generation_prompt=True),
    Conversation("multi_turn", [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a joke about <tags> & \"quotes\"."},
        {"role": "assistant", "content": "Why did the parser cross the road?"},
    ]),
    Conversation("system_generation_prompt", [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ], add_generation_prompt=True),
    # Object arguments and a None content on the tool-call message (dropped by both sides).
    Conversation("tool_call", [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [_call("call0001a", "get_weather", {"location": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call0001a", "name": "get_weather",
         "content": "{\"temperature\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ], tools=TOOLS, add_generation_prompt=True),
    Conversation("parallel_tool_calls", [
        {"role": "user", "content": "Weather and time in Tokyo?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [
            _call("call0002a", "get_weather", {"location": "Tokyo"}),
            _call("call0002b", "get_time", {"timezone": "Asia/Tokyo"})]},
        {"role": "tool", "tool_call_id": "call0002a", "name": "get_weather", "content": "rainy"},
        {"role": "tool", "tool_call_id": "call0002b", "name": "get_time", "content": "18:05"},
        {"role": "assistant", "content": "Rainy, and it is 18:05."},
    ], tools=TOOLS),
    Conversation("reasoning_thinking_on", [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "reasoning_content": "Check divisors up to 4.", "content": "Yes."},
        {"role": "user", "content": "And 21?"},
    ], add_generation_prompt=True, kwargs={"enable_thinking": True}),
    Conversation("generation_prompt_thinking_off", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
    ], add_generation_prompt=True, kwargs={"enable_thinking": False}),
    Conversation("content_parts", [
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": [{"type": "text", "text": "Say hello."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Bonjour."}]},
        {"role": "user", "content": [{"type": "text", "text": "Again, "}, {"type": "text", "text": "louder."}]},
    ], add_generation_prompt=True),
    # String (JSON text) arguments, reasoning on a tool-call turn, no tools passed.
    Conversation("string_arguments_reasoning", [
        {"role": "user", "content": "What time is it in Lima?"},
        {"role": "assistant", "content": "", "reasoning_content": "Use get_time.",
         "tool_calls": [_call("call0003a", "get_time", "{\"timezone\": \"America/Lima\"}")]},
        {"role": "tool", "tool_call_id": "call0003a", "content": "07:30"},
        {"role": "assistant", "content": "It is 07:30 in Lima."},
    ]),
    Conversation("documents", [{"role": "user", "content": "Summarise the notes."}], documents=[
        {"title": "Note A", "text": "The launch moved to May."},
        {"title": "Note B", "text": "Budget approved."},
    ], add_generation_prompt=True),
)


# --------------------------------------------------------------------------- outcomes

@dataclass(frozen=True)
class Outcome:
    """What one render produced: the text, or the kind of failure.

    ``kind`` is ``"ok"``, ``"syntax"`` (the template does not compile), ``"raised"`` (the
    template called ``raise_exception``), ``"limit"`` (one of our limits; transformers has
    none) or ``"error"`` (any other run-time failure). ``detail`` is the exception type
    and message, for the report.
    """

    kind: str
    text: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def agree(a: Outcome, b: Outcome) -> bool:
    """Same text, or the same kind of failure (``raise_exception`` also with the same message)."""
    if a.kind != b.kind:
        return False
    if a.kind == "ok":
        return a.text == b.text
    if a.kind == "raised":
        return a.text == b.text  # the raise_exception message
    return True


def first_difference(a: str, b: str, context: int = 30) -> tuple[int, str, str]:
    """Index of the first differing character and a snippet of each string around it."""
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, i - context)
    return i, a[lo:i + context], b[lo:i + context]


def describe(a: Outcome, b: Outcome, names: tuple[str, str] = ("transformers", "ours")) -> str:
    """A one-paragraph account of a disagreement."""
    if a.ok and b.ok:
        i, sa, sb = first_difference(a.text, b.text)
        return f"outputs differ at char {i}: {names[0]}={sa!r} {names[1]}={sb!r}"
    show = [f"{o.kind}: {o.detail}" if not o.ok else f"ok ({len(o.text)} chars)" for o in (a, b)]
    return f"{names[0]} -> {show[0]}; {names[1]} -> {show[1]}"


# --------------------------------------------------------------------------- transformers side

class _FixedDatetime(datetime):
    """``datetime`` whose ``now()`` is :data:`FIXED_NOW`."""

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # noqa: ARG003 - signature of datetime.now
        return FIXED_NOW


@contextmanager
def pinned_hf_clock() -> Iterator[None]:
    """Pin transformers' ``strftime_now``.

    transformers defines ``strftime_now`` as ``datetime.now().strftime(fmt)`` inside
    ``_cached_compile_jinja_template``; ``datetime`` there is a module global of
    ``transformers.utils.chat_template_utils`` (``from datetime import datetime``), looked
    up at call time, so replacing that global pins every compiled template.
    """
    from transformers.utils import chat_template_utils as ctu
    saved = ctu.datetime
    ctu.datetime = _FixedDatetime
    try:
        yield
    finally:
        ctu.datetime = saved


@lru_cache(maxsize=8)
def _hf_tokenizer_for(named: tuple[tuple[str, str], ...], extra: tuple[str, ...]) -> Any:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    texts = [t for _, t in named] + list(extra)
    vocab = {text: i for i, text in enumerate(dict.fromkeys(texts))} or {"<s>": 0}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=dict(named).get("unk_token")))
    kwargs: dict[str, Any] = dict(named)
    if extra:
        kwargs["additional_special_tokens"] = list(extra)
    return PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)


def hf_tokenizer(template: LoadedTemplate) -> Any:
    """An offline fast tokenizer carrying our template's special tokens, with its chat template.

    Built from the loader's tokens, not a fixed set: for a bare ``.jinja`` that is bos
    ``<s>`` and eos ``</s>`` only (no unk), so ``special_tokens_map`` holds exactly those two.
    ``additional_special_tokens`` go to the tokenizer as extra tokens, as a real
    ``tokenizer_config.json`` would; transformers 5 keeps them out of ``special_tokens_map``.
    """
    tokens = template.special_tokens
    named = tuple(sorted((k, str(v)) for k, v in tokens.items() if k in SPECIAL_TOKEN_KEYS and v is not None))
    extra = tuple(str(t) for t in tokens.get("additional_special_tokens") or ())
    tok = _hf_tokenizer_for(named, extra)
    tok.chat_template = (dict(template.variants) if len(template.variants) > 1
                         else next(iter(template.variants.values())))
    return tok


def _hf_kind(exc: BaseException) -> str:
    import jinja2
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return "syntax"
    # transformers' raise_exception raises the base class itself; jinja's own errors are subclasses.
    if type(exc) is jinja2.TemplateError:
        return "raised"
    return "error"


def render_hf(tokenizer: Any, conv: Conversation) -> Outcome:
    """transformers' ``apply_chat_template(..., tokenize=False)``; call inside :func:`pinned_hf_clock`."""
    try:
        text = tokenizer.apply_chat_template(
            copy.deepcopy(conv.messages), tools=copy.deepcopy(conv.tools),
            documents=copy.deepcopy(conv.documents), tokenize=False,
            add_generation_prompt=conv.add_generation_prompt, **copy.deepcopy(conv.kwargs))
    except Exception as e:  # noqa: BLE001 - any failure is an outcome to compare
        kind = _hf_kind(e)
        message = e.message if kind == "raised" and isinstance(getattr(e, "message", None), str) else str(e)
        return Outcome(kind, text=message if kind == "raised" else "", detail=f"{type(e).__name__}: {e}")
    return Outcome("ok", text=text)


# --------------------------------------------------------------------------- our side

def our_renderer(template: LoadedTemplate, engine: str = "jinja2") -> Any:
    """Our renderer for ``template``: the :class:`~chat_autoparser.generator.ChatTemplate` serving code renders
    with, the clock pinned to :data:`FIXED_NOW`."""
    return ChatTemplate(template, engine=engine, now=lambda: FIXED_NOW)


def render_ours(renderer: Any, conv: Conversation) -> Outcome:
    """Our renderer's outcome for ``conv`` (same inputs as :func:`render_hf`)."""
    try:
        text = renderer.render(copy.deepcopy(conv.messages), tools=copy.deepcopy(conv.tools),
                               documents=copy.deepcopy(conv.documents),
                               add_generation_prompt=conv.add_generation_prompt, **copy.deepcopy(conv.kwargs))
    except TemplateError as e:
        return Outcome("syntax", detail=f"TemplateError: {e.reason}")
    except TemplateRaised as e:
        return Outcome("raised", text=e.reason, detail=f"TemplateRaised: {e.reason}")
    except RenderLimitError as e:
        return Outcome("limit", detail=f"RenderLimitError: {e.reason}")
    except RenderError as e:
        return Outcome("error", detail=f"RenderError: {e.reason}")
    return Outcome("ok", text=text)


def compare_template(corpus: Path, rel: str, engine: str = "jinja2"
                     ) -> list[tuple[Conversation, Outcome, Outcome]]:
    """(conversation, transformers outcome, our outcome) for every conversation of one template."""
    template = load_template(corpus / rel)
    tokenizer = hf_tokenizer(template)
    renderer = our_renderer(template, engine)
    out = []
    with pinned_hf_clock():
        for conv in CONVERSATIONS:
            out.append((conv, render_hf(tokenizer, conv), render_ours(renderer, conv)))
    return out


# --------------------------------------------------------------------------- tests

def _agree_three_ways(template: LoadedTemplate, conv: Conversation) -> dict[str, Outcome]:
    """transformers, our jinja2 and our minijinja on one input (asserted equal by callers)."""
    with pinned_hf_clock():
        out = {"transformers": render_hf(hf_tokenizer(template), conv)}
    for engine in ("jinja2", "minijinja"):
        out[engine] = render_ours(our_renderer(template, engine), conv)
    return out


def test_special_tokens_match_transformers() -> None:
    """The HF side sees exactly the named tokens our loader supplies for a bare .jinja."""
    template = from_string("{{ bos_token }}")
    assert hf_tokenizer(template).special_tokens_map == template_special_tokens(template.special_tokens) == {
        "bos_token": "<s>", "eos_token": "</s>"}


def test_additional_special_tokens_are_not_template_variables() -> None:
    """transformers 5 passes only named tokens; ``additional_special_tokens`` stays undefined."""
    source = "{{ additional_special_tokens is defined }}|{{ pad_token }}|{{ eos_token }}"
    tokens = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "additional_special_tokens": ["<x>"]}
    outcomes = _agree_three_ways(from_string(source, special_tokens=tokens),
                                 Conversation("x", [{"role": "user", "content": "hi"}]))
    assert set(outcomes.values()) == {Outcome("ok", text="False|<pad>|</s>")}


def test_clock_is_pinned_on_both_sides() -> None:
    template = from_string("{{ strftime_now('%Y-%m-%d %H:%M:%S') }}")
    outcomes = _agree_three_ways(template, Conversation("x", [{"role": "user", "content": "hi"}]))
    assert set(outcomes.values()) == {Outcome("ok", text="2025-03-14 09:26:53")}


def test_generation_tag_and_undefined_length() -> None:
    """minijinja gets ``{% generation %}`` and jinja2's ``undefined|length == 0`` like transformers."""
    source = ("{% for m in messages %}{%- generation -%}\n[{{ m.content|length }}/{{ m.missing|length }}]\n"
              "{% endgeneration %}\n{% endfor %}")
    conv = Conversation("x", [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": "ok"}])
    outcomes = _agree_three_ways(from_string(source), conv)
    assert set(outcomes.values()) == {Outcome("ok", text="[5/0]\n[2/0]\n")}


def test_jinja2_matches_transformers(corpus_root: Path, corpus_entry: CorpusEntry) -> None:
    """Every conversation renders identically, or both sides refuse it the same way."""
    rel = corpus_entry.name
    results = compare_template(corpus_root, rel)
    failures = [f"[{conv.name}] {describe(hf, ours)}" for conv, hf, ours in results if not agree(hf, ours)]
    assert not failures, f"{rel}: jinja2 differs from transformers:\n" + "\n".join(failures)
