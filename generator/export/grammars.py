"""The request's tool-call grammar as text: GBNF (llama.cpp's dialect, our emitter in
:mod:`chat_autoparser.generator.gbnf`) and llguidance's Lark dialect (llguidance's own GBNF→Lark converter, a
dependency: the dialect is llguidance's, so its converter is the authority on it).

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    >>> text = gbnf(analyze_template("templates/chatml-think.jinja"), tools=tools)
    >>> text.startswith("root ::=")
    True
    >>> lark(analyze_template("templates/chatml-think.jinja"), tools=tools).splitlines()[0]
    '%llguidance {}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.structures import TemplateAnalysis

from ..params import generate_parser
from ...errors import ExportError, NotExpressible


def gbnf(analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None, fmt: str = "gbnf",
         **request: Any) -> str:
    """The GBNF grammar of a request (``generate_parser`` options: ``tool_choice``,
    ``parallel_tool_calls``, ``enable_thinking``, ``prompt``); NotExpressible when nothing needs
    constraining (no tools, tool_choice "none", a template that writes no calls)."""
    try:
        params = generate_parser(analysis, tools=tools, **request)
    except (TypeError, ValueError) as e:
        raise ExportError(str(e), template=analysis.template, fmt=fmt) from None
    if params.grammar is None:
        why = ("no tools given" if not tools else
               "tool_choice is 'none'" if request.get("tool_choice") == "none" else
               f"the template writes no tool calls ({analysis.tool_call_structure.reason or 'none rendered'})")
        raise NotExpressible(f"nothing to constrain: {why}", template=analysis.template, fmt=fmt)
    return params.grammar


def gbnf_to_lark(grammar: str, *, template: str | None = None) -> str:
    """``grammar`` (GBNF) in llguidance's Lark dialect (an ExportError that says so when llguidance,
    whose converter this is, is not installed)."""
    try:
        from llguidance.gbnf_to_lark import gbnf_to_lark as convert
    except ImportError:
        raise ExportError("the Lark form is llguidance's dialect, written by its converter: pip install llguidance",
                          template=template, fmt="lark") from None
    try:
        return convert(grammar)
    except Exception as e:  # the converter raises bare Exceptions
        raise ExportError(f"GBNF to Lark conversion failed: {e}", template=template, fmt="lark") from None


def lark(analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None, **request: Any) -> str:
    """The request's grammar in llguidance's Lark dialect (see :func:`gbnf`)."""
    return gbnf_to_lark(gbnf(analysis, tools=tools, fmt="lark", **request), template=analysis.template)
