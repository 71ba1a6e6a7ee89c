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
    >>> export(a, "hf")["fields"]["reasoning_content"]["close"]
    ['</think>', '<|im_end|>']
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from chat_autoparser.analyzer.load import LoadedTemplate
from chat_autoparser.analyzer.structures import TemplateAnalysis

from ...errors import ExportError, NotExpressible

FORMATS = ("hf", "edgellm", "gbnf", "lark", "structural-tag")
JSON_FORMATS = frozenset({"hf", "edgellm", "structural-tag"})


def export(analysis: TemplateAnalysis, fmt: str, *, tools: Sequence[Mapping[str, Any]] | None = None,
           template: LoadedTemplate | None = None, **kwargs: Any) -> dict[str, Any] | str:
    """``analysis`` in format ``fmt`` (one of :data:`FORMATS`): a dict for the JSON formats,
    text for the grammars. ``template`` (the loaded template) is needed by ``edgellm``, which
    renders; ``kwargs`` go to the format (the grammars take ``generate_parser``'s request
    options, ``edgellm`` ``chat_template_kwargs``)."""
    makers: dict[str, Callable[..., Any]] = _makers()
    if fmt not in makers:
        raise ExportError(f"unknown format; choose one of {', '.join(FORMATS)}", template=analysis.template, fmt=fmt)
    if fmt == "edgellm":
        if template is None:
            raise ExportError("the Edge-LLM export renders the template: pass template=", template=analysis.template,
                              fmt=fmt)
        return makers[fmt](template, analysis, **kwargs)
    return makers[fmt](analysis, tools=tools, **kwargs)


def _makers() -> dict[str, Callable[..., Any]]:
    from . import edgellm, grammars, hf, structural_tag
    return {"hf": hf.response_template, "edgellm": edgellm.chat_template, "gbnf": grammars.gbnf,
            "lark": grammars.lark, "structural-tag": structural_tag.structural_tag}


__all__ = ["export", "FORMATS", "JSON_FORMATS", "ExportError", "NotExpressible"]
