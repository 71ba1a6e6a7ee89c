"""chat-autoparser's generator: from a TemplateAnalysis to what a server runs.

Example::

    >>> from analyzer import analyze_template
    >>> from generator import generate_parser
    >>> params = generate_parser(analyze_template("templates/chatml-think.jinja"))
    >>> params.parser.parse("Hello")["content"]
    'Hello'
"""

from .assemble import as_delta, default_call_id
from .chat_template import ChatTemplate
from .openai_chunks import ChunkStream
from .parser import MessageParser, MessageStream
from .params import ChatParams, generate_parser

__all__ = ["ChatTemplate", "ChunkStream", "default_call_id", "generate_parser", "ChatParams", "MessageParser", "MessageStream", "as_delta", "check_roundtrip",
           "bridge_to_next_turn", "render_with_attribution"]

# The roundtrip check and the bridge sit above the parser (they render, parse and render again);
# they are imported on first use so that importing the parser does not load them.
_ABOVE = {"check_roundtrip": "generator.verify.roundtrip", "bridge_to_next_turn": "generator.prefix.bridge",
          "render_with_attribution": "generator.prefix.bridge"}


def __getattr__(name: str) -> object:
    if name in _ABOVE:
        import importlib
        return getattr(importlib.import_module(_ABOVE[name]), name)
    raise AttributeError(f"module 'generator' has no attribute {name!r}")
