"""Markers a template's source writes while rendering tool calls, read from its AST.

The analysis learns the call format from what the template renders for the probe calls. Some
templates know more than one form and render the others only in branches the probes do not
take (a call to a built-in tool, an "ipython" mode: ``<|python_tag|>`` before the call,
``<|eom_id|>`` after it). Models trained on those templates write such forms for ordinary
calls too, so the parser accepts calls that such a marker opens (see
``ToolCallStructure.alt_openers``).

A marker counts when it stands in text the template outputs inside a block that is about tool
calls: an ``if`` whose test or a ``for`` whose iterable names something with ``tool_call`` in it
(``message.tool_calls``, ``'tool_calls' in message``, ``tool_call.name``...), the convention of
Hugging Face chat templates. Markers the probe renders already show are not alternatives.

Example::

    >>> src = ("{% for m in messages %}{% if m.tool_calls %}{% if builtin %}<|python_tag|>{% endif %}"
    ...        "{{ m.tool_calls[0].function.name }}{{ '<|eom|>' }}{% else %}<|text|>{{ m.content }}{% endif %}"
    ...        "{% endfor %}")
    >>> call_branch_markers(src)
    ('<|python_tag|>', '<|eom|>')
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import nodes

from .markers import markers_in
from .render import parse_template

_ABOUT = "tool_call"


def _mentions(node: nodes.Node | None) -> bool:
    """Whether an expression names something about tool calls."""
    if node is None:
        return False
    for n in [node, *node.find_all((nodes.Name, nodes.Getattr, nodes.Const))]:
        if isinstance(n, nodes.Name) and _ABOUT in n.name:
            return True
        if isinstance(n, nodes.Getattr) and _ABOUT in n.attr:
            return True
        if isinstance(n, nodes.Const) and isinstance(n.value, str) and _ABOUT in n.value:
            return True
    return False


def _texts(output: nodes.Output) -> list[str]:
    """The literal text an output node writes (template data and string constants in it)."""
    out: list[str] = []
    for child in output.nodes:
        if isinstance(child, nodes.TemplateData):
            out.append(child.data)
        else:
            consts = [child] if isinstance(child, nodes.Const) else child.find_all(nodes.Const)
            out += [c.value for c in consts if isinstance(c.value, str)]
    return out


_GUARDS = {nodes.If: "test", nodes.For: "iter"}


@lru_cache(maxsize=512)
def call_branch_markers(source: str) -> tuple[str, ...]:
    """Every marker written in the template's tool-call blocks, in source order (unique).
    An unparsable source has none (the analysis reports its errors elsewhere). Read once per
    source, as :func:`chat_autoparser.analyzer.template_info.template_info` is."""
    try:
        ast = parse_template(source)
    except Exception:  # noqa: BLE001 - any syntax error: nothing to read here
        return ()
    found: dict[str, None] = {}

    def visit(node: nodes.Node, inside: bool) -> None:
        if isinstance(node, nodes.Output):
            if inside:
                for text in _texts(node):
                    found.update((t, None) for t in markers_in(text))
            return
        guard = _GUARDS.get(type(node))
        if guard is not None:  # the body is a call block when its condition mentions calls
            for child in node.body:
                visit(child, inside or _mentions(getattr(node, guard)))
            for child in [*getattr(node, "elif_", ()), *node.else_]:
                visit(child, inside)
            return
        for child in node.iter_child_nodes():
            visit(child, inside)

    visit(ast, False)
    return tuple(found)


def alternative_openers(source: str, rendered: str) -> tuple[str, ...]:
    """The markers of the template's tool-call blocks that ``rendered`` (what the probes showed)
    does not hold: forms of a call the template writes in branches the probes did not take."""
    shown = set(markers_in(rendered))
    return tuple(m for m in call_branch_markers(source) if m not in shown)
