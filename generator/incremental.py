"""Incremental full-conversation rendering (seed 003, after llama.cpp's ``common_chat_format_single``):
the text a new message adds is ``render(messages[:n+1])`` minus ``render(messages[:n])``, both
rendered whole so templates that look at positions or neighbours stay right. The last render is
cached: adding messages one by one costs one render each.

Example::

    >>> calls = []
    >>> def render(msgs, add_generation_prompt=False):
    ...     calls.append(len(msgs)); return "".join(f"<{m['content']}>" for m in msgs)
    >>> inc = IncrementalRenderer(render)
    >>> inc.render([{"content": "a"}]), inc.render([{"content": "a"}, {"content": "b"}]), calls
    ('<a>', '<b>', [1, 2])
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Sequence

from chat_autoparser.errors import RenderError

Render = Callable[..., str]


class IncrementalRenderer:
    """``render(messages, **kwargs)``: what the last message adds to the rendered conversation
    (a render of the conversation without it, cached, is the prefix)."""

    def __init__(self, render: Render) -> None:
        self._render = render
        self._key: Any = None  # the last conversation rendered (messages and options)
        self._text = ""

    def _full(self, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any]) -> str:
        key = (copy.deepcopy(list(messages)), repr(sorted(kwargs.items())))
        if key == self._key:
            return self._text
        text = self._render(list(messages), **kwargs)
        self._key, self._text = key, text
        return text

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False,
               **kwargs: Any) -> str:
        """The text ``messages[-1]`` adds (and the generation prompt, when asked). Raises
        RenderError when the template writes the earlier messages differently once it is there
        (the prefix is then not a prefix)."""
        if not messages:
            raise ValueError("no messages to render")
        prefix = self._full(messages[:-1], kwargs) if len(messages) > 1 else ""
        full = self._render(list(messages), add_generation_prompt=add_generation_prompt, **kwargs)
        if not add_generation_prompt:
            self._key, self._text = (copy.deepcopy(list(messages)), repr(sorted(kwargs.items()))), full
        if not full.startswith(prefix):
            raise RenderError("the template writes the conversation differently once the new message is added: "
                              "no incremental rendering (render it whole)")
        return full[len(prefix):]
