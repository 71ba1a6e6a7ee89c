"""Ids for the calls a model writes without one: in the shape the template accepts, unique per
request, and still the same for the same request and output.

The parser keeps an id the model writes (a format whose calls carry one). For the others the
parser asks an id factory (``IdFactory``: index, name, text before the call). :func:`call_ids`
builds one from a request's basis (the prompt, or the conversation's messages): a call's id is
the basis', its name's and its index's, so the same call text in two turns of a conversation gets two
ids, while the same request parsed again (one-shot or streamed, whatever text a parser saw
before the call) gets the same ones.

Some templates refuse ids of another shape (Mistral's raise "Tool call IDs should be
alphanumeric strings with length 9!" when the next turn is rendered): :func:`learn_id_shape`
renders a call and its result with an id of each shape, in order, and keeps the first the
template renders.

Example::

    >>> a = call_ids("prompt one")(0, "get_weather", "")
    >>> b = call_ids("prompt two")(0, "get_weather", "")
    >>> a != b and a.startswith("call_") and len(a) == 29
    True
    >>> short = call_ids("prompt one", "alnum9")(0, "get_weather", "")
    >>> len(short) == 9 and short.isalnum()
    True
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

from chat_autoparser.errors import RenderError

from .assemble import IdFactory, default_call_id

# id shapes, in the order a template is tried with them: OpenAI's ``call_`` + hex, then nine
# alphanumerics (what Mistral's templates check)
SHAPES = ("call", "alnum9")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _digest(*parts: str, size: int) -> bytes:
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.digest()


def call_ids(basis: str = "", shape: str = "call") -> IdFactory:
    """An id factory for one request: ``basis`` (the prompt, or the request's messages) makes its
    ids differ from another request's; ``shape`` one of :data:`SHAPES`. With no basis and the
    ``call`` shape, the default ids (:func:`~chat_autoparser.generator.assemble.default_call_id`)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown id shape {shape!r}; known: {', '.join(SHAPES)}")
    if shape == "call" and not basis:
        return default_call_id
    salt = _digest(basis, size=8).hex()

    def call(index: int, name: str, before: str) -> str:
        return "call_" + _digest(salt, name, size=10).hex() + "%04x" % index

    def alnum9(index: int, name: str, before: str) -> str:
        n = int.from_bytes(_digest(salt, name, str(index), size=8), "big")
        out = []
        for _ in range(9):
            n, r = divmod(n, len(_ALPHABET))
            out.append(_ALPHABET[r])
        return "".join(out)

    return call if shape == "call" else alnum9


def learn_id_shape(render: Callable[[Sequence[dict[str, Any]]], str], args_as_string: bool = False) -> str:
    """The first of :data:`SHAPES` whose id the template renders in a call and its result (``render``
    renders a conversation; a template that refuses every shape, or renders no calls, gets
    ``call``)."""
    for shape in SHAPES:
        cid = call_ids("learn_id_shape", shape)(0, "get_weather", "")
        args: Any = '{"city": "Paris"}' if args_as_string else {"city": "Paris"}
        messages = [{"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
                    {"role": "tool", "tool_call_id": cid, "name": "get_weather", "content": "sunny"}]
        try:
            render(messages)
        except RenderError:
            continue
        return shape
    return "call"
