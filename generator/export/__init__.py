"""Exports of the analysis for other tools, one module per format, all reading the call skeleton
through one walk (:mod:`chat_autoparser.analyzer.walk`, :mod:`chat_autoparser.generator.export.frame`).

============== ============================================================ ==============
format         what                                                         returns
============== ============================================================ ==============
hf             transformers' ``response_template`` (``parse_response``)      dict
edgellm        TensorRT Edge-LLM ``processed_chat_template.json``           dict
gbnf           the request's tool-call grammar (llama.cpp GBNF)             text
lark           the same grammar in llguidance's Lark dialect                text
structural-tag vLLM / SGLang ``response_format`` of type ``structural_tag`` dict
============== ============================================================ ==============

What a format cannot say raises :class:`NotExpressible` with the reason.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> a = analyze_template("templates/chatml-think.jinja")
    >>> export(a, "hf")["fields"]["thinking"]["close"]
    ['</think>', '<|im_end|>']
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.structures import TemplateAnalysis

from ...errors import ExportError, NotExpressible

@dataclass(frozen=True, slots=True)
class Exporter:
    """One export format: the function that makes it (``module.function`` under this package),
    whether it is a dict (written as JSON) or text, whether it renders the template (and needs
    it), and which of a request's options it takes: ``"request"`` (``generate_parser``'s:
    tools, tool_choice, ...), ``"chat_template_kwargs"`` or none."""

    name: str
    module: str
    function: str
    json: bool
    what: str
    renders: bool = False
    options: str = ""

    def make(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(f"{__name__}.{self.module}"), self.function)

    def request_options(self, request: Mapping[str, Any], chat_template_kwargs: Mapping[str, Any] | None
                        ) -> dict[str, Any]:
        """What of a request (``generate_parser``'s options, the template's kwargs) this format takes."""
        if self.options == "request":
            return dict(request)
        if self.options == "chat_template_kwargs":
            return {"chat_template_kwargs": dict(chat_template_kwargs or {})}
        return {}


# Every export: one module of this package and one entry here. The command line, the verifier
# (generator.verify.exports, which must check each) and the benchmark read this table.
EXPORTERS: dict[str, Exporter] = {e.name: e for e in (
    Exporter("hf", "hf", "response_template", json=True, what="transformers' response_template (parse_response)"),
    Exporter("edgellm", "edgellm", "chat_template", json=True, renders=True, options="chat_template_kwargs",
             what="TensorRT Edge-LLM processed_chat_template.json"),
    Exporter("gbnf", "grammars", "gbnf", json=False, options="request",
             what="the request's tool-call grammar (llama.cpp GBNF)"),
    Exporter("lark", "grammars", "lark", json=False, options="request",
             what="the same grammar in llguidance's Lark dialect"),
    Exporter("structural-tag", "structural_tag", "structural_tag", json=True, options="request",
             what="vLLM / SGLang response_format of type structural_tag"),
)}
FORMATS = tuple(EXPORTERS)
JSON_FORMATS = frozenset(name for name, e in EXPORTERS.items() if e.json)


def export(analysis: TemplateAnalysis, fmt: str, *, tools: Sequence[Mapping[str, Any]] | None = None,
           template: LoadedTemplate | None = None, **kwargs: Any) -> dict[str, Any] | str:
    """``analysis`` in format ``fmt`` (one of :data:`FORMATS`): a dict for the JSON formats,
    text for the grammars. ``template`` (the loaded template) is needed by the formats that
    render it (``edgellm``); ``kwargs`` go to the format (the grammars take ``generate_parser``'s
    request options, ``edgellm`` ``chat_template_kwargs``)."""
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise ExportError(f"unknown format; choose one of {', '.join(FORMATS)}", template=analysis.template, fmt=fmt)
    if exporter.renders:
        if template is None:
            raise ExportError(f"the {fmt} export renders the template: pass template=", template=analysis.template,
                              fmt=fmt)
        return exporter.make()(template, analysis, tools=tools, **kwargs)
    return exporter.make()(analysis, tools=tools, **kwargs)


__all__ = ["export", "EXPORTERS", "Exporter", "FORMATS", "JSON_FORMATS", "ExportError", "NotExpressible"]
