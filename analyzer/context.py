"""The variables a template sees, built from the caller's input as transformers builds them.

``apply_chat_template`` drops ``None``-valued message keys, rebuilds every input from plain
JSON types, aliases the reasoning fields and passes the tokenizer's named special tokens; both
engines render from what :func:`render_context` returns. Plain data is also what makes the
values safe to hand to a template: no caller object, method or shared part reaches it.

Example::

    >>> prepare_messages([{"role": "assistant", "reasoning": "why", "content": None}])
    [{'thinking': 'why', 'role': 'assistant', 'reasoning': 'why', 'reasoning_content': 'why'}]
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Sequence

from ..errors import RenderError
from .load import SPECIAL_TOKEN_KEYS, LoadedTemplate

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def plain_data(value: Any) -> Any:
    """Rebuild ``value`` from plain JSON types, as transformers does before rendering.

    Anything that is not JSON-like becomes an inert ``"<TypeName>"`` placeholder.
    """
    t = type(value)
    if value is None or t is str or t is int or t is float or t is bool:
        return value
    if t is dict:  # (the common containers first: the checks below are slower)
        return {k if type(k) is str else plain_data(k): v if type(v) is str else plain_data(v)
                for k, v in value.items()}
    if t is list:
        return [v if type(v) is str else plain_data(v) for v in value]
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return plain_data(value.model_dump())
    return f"<{type(value).__name__}>"


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop ``None``-valued keys, rebuild as plain data, alias reasoning fields (as transformers)."""
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise RenderError(f"message {i} is not a mapping ({type(msg).__name__})")
        m = plain_data({k: v for k, v in msg.items() if v is not None})
        reasoning = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def template_special_tokens(special_tokens: Mapping[str, Any]) -> dict[str, str]:
    """The special tokens transformers 5 passes to a template: ``tokenizer.special_tokens_map``.

    That map holds only the named tokens (bos/eos/unk/sep/pad/cls/mask) that are set, each as
    ``str``; ``additional_special_tokens`` (``extra_special_tokens`` in v5) is *not* passed,
    so a template reading it sees an undefined value. The loader keeps the extra tokens for
    other uses; they are filtered here.
    """
    return {k: str(v) for k, v in special_tokens.items() if k in SPECIAL_TOKEN_KEYS and v is not None}


def render_context(template: LoadedTemplate, messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Any] | None, documents: Sequence[Any] | None,
                    add_generation_prompt: bool, kwargs: Mapping[str, Any],
                    plain_tools: list[Any] | None = None) -> dict[str, Any]:
    """The variables a template sees, built as ``apply_chat_template`` builds them.

    Special tokens first, then the caller's kwargs (which override them), then the fixed
    names; every input is rebuilt from plain data (an input nested too deep to rebuild is a
    RenderError).
    """
    try:
        return _context(template, messages, tools, documents, add_generation_prompt, kwargs, plain_tools)
    except RecursionError:
        raise RenderError("the render's input (messages, tools, documents or kwargs) is nested too deep",
                          template=template.name) from None


def _context(template: LoadedTemplate, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None,
             documents: Sequence[Any] | None, add_generation_prompt: bool, kwargs: Mapping[str, Any],
             plain_tools: list[Any] | None) -> dict[str, Any]:
    return {
        **template_special_tokens(template.special_tokens),
        **plain_data(dict(kwargs)),
        "messages": prepare_messages(messages),
        "tools": (plain_tools if plain_tools is not None else plain_data(list(tools))) if tools is not None else None,
        "documents": plain_data(list(documents)) if documents is not None else None,
        "add_generation_prompt": add_generation_prompt,
    }


def hf_tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
              separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """transformers' ``tojson``: plain ``json.dumps``, no HTML escaping, keys in input order."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)
