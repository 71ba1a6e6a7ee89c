"""chat-autoparser: learn how a model writes reasoning, content and tool calls from its chat
template, and build what a server needs to read it back.

The package is one import name. Its parts, one layer above the other:
``chat_autoparser.analyzer`` (load, render, probe, analyse), ``chat_autoparser.generator``
(parsers, grammars, serving, exports, prefix tools; ``generator.verify`` checks them) and
``chat_autoparser.tools`` (the command-line tools). The names most programs need are here::

    >>> from chat_autoparser import analyze_template, generate_parser
    >>> params = generate_parser(analyze_template("templates/chatml-think.jinja"))
    >>> params.parser.parse("<think>Let me see.</think>Hello")["content"]
    'Hello'
"""

from __future__ import annotations

import os as _os

__version__ = "0.2.0"

# In a source checkout the parts are the repository's top-level folders (analyzer/, generator/,
# tools/, templates/), beside this one; installed, they are inside it (pyproject.toml's
# package-dir). A checkout: no analyzer inside this folder, and the analyzer and the generator
# beside it.
_here = _os.path.dirname(_os.path.abspath(__file__))
_checkout = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "analyzer")) and \
        all(_os.path.isfile(_os.path.join(_checkout, part, "__init__.py")) for part in ("analyzer", "generator")):
    __path__.append(_checkout)  # type: ignore[name-defined]  # noqa: F821 - a package's own __path__

from .analyzer import (AnalysisError, ChatAutoparserError, ParseError, RenderError, TemplateAnalysis,  # noqa: E402
                       TemplateError, analyze_template, from_string, load_template)
from .generator import (ChatParams, ChatTemplate, ChunkStream, MessageParser, MessageStream,  # noqa: E402
                        generate_parser)
from .generator.export import ExportError, NotExpressible, export  # noqa: E402

__all__ = [
    "__version__", "analyze_template", "load_template", "from_string", "TemplateAnalysis", "generate_parser",
    "ChatParams", "ChatTemplate", "ChunkStream", "MessageParser", "MessageStream", "export", "check_roundtrip",
    "bridge_to_next_turn", "render_with_attribution", "ChatAutoparserError", "TemplateError", "RenderError",
    "AnalysisError", "ParseError", "ExportError", "NotExpressible",
]


def __getattr__(name: str) -> object:
    """The roundtrip check and the bridge render, parse and render again: they are loaded on
    first use, so that importing the parser does not load them."""
    if name == "check_roundtrip":
        from .generator.verify.roundtrip import check_roundtrip
        return check_roundtrip
    if name in ("bridge_to_next_turn", "render_with_attribution"):
        from . import generator  # (loads the bridge on first use, as the generator does)
        return getattr(generator, name)
    raise AttributeError(f"module 'chat_autoparser' has no attribute {name!r}")
