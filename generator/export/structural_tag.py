"""xgrammar structural tags: the ``response_format`` of type ``structural_tag`` that vLLM and
SGLang accept (``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
"triggers": [...]}``): free text until a trigger, then one tool's call, its arguments
constrained by the tool's JSON schema.

Each tool's ``begin`` is the call's skeleton up to its arguments with the tool's name written
in (and the section opener, when calls sit in one section); ``end`` what closes the call (and the
section). A format says this only when a call is fixed text around one JSON value: an id or an
index the model chooses before the arguments, tagged arguments, or (with parallel calls) one
section holding several calls cannot be said, and raise :class:`NotExpressible`.

Example::

    >>> from chat_autoparser.analyzer import analyze_template
    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    >>> tag = structural_tag(analyze_template("templates/chatml-think.jinja"), tools=tools)
    >>> tag["triggers"], tag["structures"][0]["begin"]
    (['<tool_call>'], '<tool_call>\\n{"name": "f", "arguments": ')
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from chat_autoparser.analyzer.structures import Part, TemplateAnalysis
from chat_autoparser.analyzer.walk import At, SkeletonVisitor, walk

from ..message import split_turn_end
from ..skeleton import first_piece
from ...errors import NotExpressible
from .frame import call_frame, tool_names, tool_parameters

FMT = "structural-tag"


class _Begin(SkeletonVisitor[str]):
    """The parts before the arguments as fixed text, with one tool's name."""

    def __init__(self, name: str, template: str) -> None:
        self.tool, self.template = name, template

    def lit(self, part: Part, at: At) -> str:
        return part.text

    def name(self, part: Part, at: At) -> str:
        return self.tool

    def slot(self, part: Part, at: At) -> str:
        raise NotExpressible(f"the call writes a{'n' if part.kind[0] in 'aeiou' else ''} {part.kind} the model "
                             "chooses before its arguments: a tag's begin is fixed text", template=self.template,
                             fmt=FMT)


def structural_tag(analysis: TemplateAnalysis, *, tools: Sequence[Mapping[str, Any]] | None = None,
                   parallel_tool_calls: bool = True, **_: Any) -> dict[str, Any]:
    """The structural tag for a request with ``tools`` (see the module docstring)."""
    name = analysis.template
    if not tools:
        raise NotExpressible("no tools given: a structural tag constrains tool calls", template=name, fmt=FMT)
    analysis = split_turn_end(analysis)[0]  # the model stops at the turn's end: not in the tag
    ts = analysis.tool_call_structure
    frame = call_frame(ts, FMT, name)
    if ts.args_mode != "whole" or ts.args_format.kind != "json":
        raise NotExpressible("the arguments are not one JSON value (tagged units or another notation): a JSON "
                             "schema cannot constrain them", template=name, fmt=FMT)
    start, end = ts.tool_section_start, ts.tool_section_end  # (a JSON array's brackets are fixed text too)
    sectioned = bool(start.strip() or end.strip())
    if sectioned and parallel_tool_calls and ts.supports_parallel:
        raise NotExpressible("parallel calls share one tool section: a tag per call would open the section "
                             "again (export with parallel_tool_calls=False)", template=name, fmt=FMT)
    structures = []
    for tool, tool_name in zip(tools, tool_names(tools)):
        begin = (start + "".join(walk(frame.before, _Begin(tool_name, name)))).lstrip()
        if not begin:
            raise NotExpressible("a call starts with its arguments: no text to trigger on", template=name, fmt=FMT)
        structures.append({"begin": begin, "schema": tool_parameters(tool), "end": frame.closer + end})
    triggers = list(dict.fromkeys(first_piece(s["begin"]) for s in structures))
    return {"type": "structural_tag", "structures": structures, "triggers": triggers}
