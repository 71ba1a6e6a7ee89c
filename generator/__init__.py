"""chat-autoparser's generator: from a TemplateAnalysis to what a server runs.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> from chat_autoparser.generator import generate_parser
    >>> params = generate_parser(analyze_template("templates/chatml-think.jinja"))
    >>> params.parser.parse("Hello")["content"]
    'Hello'
"""

from .assemble import as_delta, default_call_id
from .chat_template import ChatTemplate
from .openai_chunks import ChunkStream
from .parser import MessageParser, MessageStream
from .params import ChatParams, generate_parser

__all__ = ["ChatTemplate", "ChunkStream", "default_call_id", "generate_parser", "ChatParams", "MessageParser",
           "MessageStream", "as_delta", "bridge_to_next_turn", "render_with_attribution"]


def __getattr__(name: str) -> object:
    """The bridge renders, parses and renders again: it is loaded on first use, so that
    importing the parser does not load it. (The roundtrip check is a layer above:
    ``chat_autoparser.check_roundtrip``.)"""
    if name in ("bridge_to_next_turn", "render_with_attribution"):
        from .prefix import bridge
        return getattr(bridge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
