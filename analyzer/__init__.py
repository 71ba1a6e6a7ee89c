"""chat-autoparser's analyzer: learn how a chat template writes reasoning, content and tool calls.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> analysis = analyze_template("templates/chatml-think.jinja")
    >>> analysis.content_structure.reasoning_mode.value
    'REASONING_OPTIONAL'
"""

from .analyze import analyze_template
from ..errors import (AnalysisError, ChatAutoparserError, ParseError, RenderError, RenderLimitError, SecurityError,
                     TemplateError, TemplateRaised)
from .load import LoadedTemplate, from_string, load_template
from .render import ENGINES, RenderLimits, make_renderer
from .structures import (ArgumentFormat, Caps, ContentMode, ContentStructure, FunctionFormat, ReasoningMode,
                         TemplateAnalysis, ThinkingSetting, ToolCallStructure)

__all__ = [
    "analyze_template", "load_template", "from_string", "make_renderer", "LoadedTemplate", "RenderLimits", "ENGINES",
    "TemplateAnalysis", "Caps", "ContentStructure", "ToolCallStructure", "ThinkingSetting", "ReasoningMode",
    "ContentMode", "FunctionFormat", "ArgumentFormat", "ChatAutoparserError", "TemplateError", "RenderError",
    "RenderLimitError", "SecurityError", "TemplateRaised", "AnalysisError", "ParseError",
]
