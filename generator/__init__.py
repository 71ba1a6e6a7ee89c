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

__all__ = ["ChatTemplate", "ChunkStream", "default_call_id", "generate_parser", "ChatParams", "MessageParser", "MessageStream", "as_delta"]
