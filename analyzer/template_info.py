"""Static facts read from a template's AST: the variables it reads, and what it compares them to.

The analysis is differential (it renders), but knowing which variables a template reads
tells it which settings are worth rendering: a template that reads ``reasoning_effort`` and
compares it with ``"low"`` gets probed with ``reasoning_effort="low"``.

Example::

    >>> info = template_info("{% if enable_thinking %}<think>{% endif %}{{ mode == 'fast' }}")
    >>> sorted(info.variables)
    ['enable_thinking', 'mode']
    >>> info.constants_for("mode")
    ('fast',)
    >>> sorted(info.inputs)   # every name it loads: what its renders can depend on
    ['enable_thinking', 'mode']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from functools import lru_cache

from jinja2 import nodes

from .render import _ENVIRONMENTS, parse_template


@dataclass(frozen=True, slots=True)
class TemplateInfo:
    variables: frozenset[str]
    compared: tuple[tuple[str, tuple[str | int, ...]], ...]  # variable -> constants it meets
    literals: tuple[str, ...]  # every string constant and text block in the source
    random_sources: tuple[str, ...] = ()  # the `random` filter, `lipsum()`: output that varies
    # Every name the template loads anywhere, a superset of what it reads from its caller (a
    # variable not in it cannot change a render); None when it may read any variable.
    inputs: frozenset[str] | None = None
    # variable -> the variables tested in the branches it guards (``{% if a %}{% if b %}``: a -> b)
    guarded: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def constants_for(self, name: str) -> tuple[str | int, ...]:
        return next((vals for var, vals in self.compared if var == name), ())


def _consts(node: nodes.Node) -> list[str]:
    # Compiling folds constant lists into Const(list) in place, and the AST is shared with
    # the compiled template (parsed once), so both forms occur.
    if isinstance(node, nodes.Const):
        values = node.value if isinstance(node.value, (list, tuple)) else [node.value]
        return [v for v in values if isinstance(v, (str, int)) and not isinstance(v, bool)]
    if isinstance(node, (nodes.List, nodes.Tuple)):
        return [v for item in node.items for v in _consts(item)]
    return []


def _subject(node: nodes.Node) -> str | None:
    """The variable an expression is about, through filters: ``x | lower`` → ``x``."""
    while isinstance(node, nodes.Filter):
        node = node.node
    return node.name if isinstance(node, nodes.Name) else None


def _walk(ast: nodes.Node) -> dict[type, list[nodes.Node]]:
    """Every node below ``ast`` by exact type, in ``find_all`` order (pre-order), in one pass.

    ``find_all`` walks the whole tree once per call; the analysis needs nine kinds of node, and
    on large templates those walks were a tenth of the analysis time."""
    found: dict[type, list[nodes.Node]] = {}
    Node = nodes.Node

    def visit(node: nodes.Node) -> None:
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, Node):
                found.setdefault(type(value), []).append(value)
                visit(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, Node):
                        found.setdefault(type(item), []).append(item)
                        visit(item)

    visit(ast)
    return found


def _all(found: dict[type, list[nodes.Node]], kind: type) -> list[Any]:
    """The nodes of ``kind`` in tree order (the node kinds asked for have no subclasses)."""
    return found.get(kind, [])


def _read_names(ast: nodes.Template, found: dict[type, list[nodes.Node]] | None = None) -> frozenset[str]:
    """Names the template reads from its caller (a cheap stand-in for
    ``jinja2.meta.find_undeclared_variables``, which runs a whole code-generation pass).

    A name the template also sets is still an input when it is given a default
    (``x | default(..)``, ``x is defined``, ``set x = x ...``): that is how templates declare
    optional switches."""
    found = _walk(ast) if found is None else found
    loaded, stored = set(), set()
    for n in _all(found, nodes.Name):
        (stored if n.ctx in ("store", "param") else loaded).add(n.name)
    for m in _all(found, nodes.Macro):
        stored.add(m.name)
    defaulted = set()
    for t in _all(found, nodes.Test):
        if t.name in ("defined", "undefined", "none") and _subject(t.node):
            defaulted.add(_subject(t.node))
    for f in _all(found, nodes.Filter):
        if f.name in ("default", "d") and _subject(f.node):
            defaulted.add(_subject(f.node))
    for a in _all(found, nodes.Assign):
        if isinstance(a.target, nodes.Name):
            if any(n.name == a.target.name for n in _all(_walk(a.node), nodes.Name)):
                defaulted.add(a.target.name)
    return frozenset((loaded - stored) | (defaulted & loaded))


# Names that print or hand over the whole context (minijinja's ``debug()``), and statements that
# pass it to another template: a template using one may read any variable.
_CONTEXT_NAMES = frozenset({"debug"})
_CONTEXT_NODES = (nodes.ContextReference, nodes.DerivedContextReference, nodes.Include, nodes.Import,
                  nodes.FromImport, nodes.Extends, nodes.OverlayScope)


def _inputs(found: dict[type, list[nodes.Node]]) -> frozenset[str] | None:
    """Every name loaded anywhere (a name also set is still counted), or None when the template
    may read any variable."""
    names = {n.name for n in _all(found, nodes.Name) if n.ctx == "load"}
    names |= {n.name for n in _all(found, nodes.NSRef)}
    if names & _CONTEXT_NAMES or any(_all(found, kind) for kind in _CONTEXT_NODES):
        return None
    return frozenset(names)


def _guarded(ast: nodes.Template, tested: Any) -> dict[str, list[str]]:
    """switch -> the switches tested only inside its branches (``{% if a %}{% if b %}``, with
    ``b`` tested nowhere else: a -> b)."""
    tests: dict[str, int] = {}
    under: dict[tuple[str, str], int] = {}
    stack: list[tuple[nodes.Node, frozenset[str]]] = [(ast, frozenset())]
    while stack:
        node, outer = stack.pop()
        if isinstance(node, nodes.If):
            names = set(tested(node.test))
            for name in names:
                tests[name] = tests.get(name, 0) + 1
                for o in outer - {name}:
                    under[(o, name)] = under.get((o, name), 0) + 1
            stack += [(n, outer | names) for n in node.body]
            stack += [(n, outer) for n in [*node.elif_, *node.else_]]
            continue
        stack += [(n, outer) for n in node.iter_child_nodes()]
    out: dict[str, list[str]] = {}
    for (o, name), count in sorted(under.items()):
        if count == tests[name]:
            out.setdefault(o, []).append(name)
    return out


# Names jinja defines inside loops, macros and calls: never the caller's switches.
_LOOP_NAMES = frozenset({"loop", "caller", "varargs", "kwargs", "self", "super"})
# What transformers' apply_chat_template hands every template: inputs, never switches.
RENDER_INPUTS = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                           "bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token",
                           "mask_token", "additional_special_tokens", "strftime_now", "raise_exception"})


@lru_cache(maxsize=512)
def template_info(source: str) -> TemplateInfo:
    """Undeclared variables, compared constants and literal strings of ``source``."""
    ast = parse_template(source)
    found = _walk(ast)
    variables = _read_names(ast, found) - set(_ENVIRONMENTS["immutable"].globals)
    compared: dict[str, list[str]] = {}

    def note(var: str, values: list[str]) -> None:
        bucket = compared.setdefault(var, [])
        for v in values:
            if v not in bucket:
                bucket.append(v)

    for cmp in _all(found, nodes.Compare):
        operands = [cmp.expr] + [op.expr for op in cmp.ops]
        names = [n for n in (_subject(o) for o in operands) if n]
        values = [v for o in operands for v in _consts(o)]
        for name in names:
            note(name, values)
    for flt in _all(found, nodes.Filter):  # x | default("high")
        if flt.name in ("default", "d") and _subject(flt.node):
            note(_subject(flt.node), [v for a in flt.args for v in _consts(a)])
    for cond in _all(found, nodes.CondExpr):  # x if x is defined else "high"
        if isinstance(cond.test, nodes.Test) and isinstance(cond.test.node, nodes.Name):
            note(cond.test.node.name, _consts(cond.expr2) if cond.expr2 is not None else [])
    literals: list[str] = []
    for const in _all(found, nodes.Const):
        if isinstance(const.value, str) and const.value:
            literals.append(const.value)
    for data in _all(found, nodes.TemplateData):
        if data.data:
            literals.append(data.data)
    random_sources = sorted({"random" for f in _all(found, nodes.Filter) if f.name == "random"}
                            | {"lipsum" for n in _all(found, nodes.Name) if n.name == "lipsum" and n.ctx == "load"})
    # switches: inputs the template sets, if at all, only to a constant (its default); not the
    # ones every caller passes (messages, add_generation_prompt, the special tokens, ...)
    computed = {a.target.name for a in _all(found, nodes.Assign)
                if isinstance(a.target, nodes.Name) and not isinstance(a.node, nodes.Const)}
    switches = variables - computed - _LOOP_NAMES - RENDER_INPUTS

    def tested(test: nodes.Node) -> list[str]:
        """The switches ``test`` reads, but not where it only asks whether one is set
        (``x is defined``: how a template gives a switch its default)."""
        out, todo = [], [test]
        while todo:
            node = todo.pop()
            if isinstance(node, nodes.Test) and node.name in ("defined", "undefined", "none") \
                    and isinstance(node.node, nodes.Name):
                continue
            if isinstance(node, nodes.Name) and node.name in switches:
                out.append(node.name)
            todo += list(node.iter_child_nodes())
        return out

    guarded = _guarded(ast, tested)
    return TemplateInfo(variables=variables,
                        compared=tuple((k, tuple(v)) for k, v in sorted(compared.items())),
                        literals=tuple(literals), random_sources=tuple(random_sources), inputs=_inputs(found),
                        guarded=tuple((k, tuple(v)) for k, v in sorted(guarded.items())))


# --------------------------------------------------------------------------- content blocks

@dataclass(frozen=True, slots=True)
class BlockKind:
    """A kind of content block a template writes: a block whose ``"type"`` is ``type``, in a
    list that is the message content (``container == ""``) or the value of ``container`` in a
    content mapping, whose text the template reads from the block's ``field``."""
    container: str
    type: str
    field: str


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


def _key_of(node: nodes.Node, var: str) -> str | None:
    """``k`` when ``node`` is ``var.k`` or ``var['k']``."""
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name == var:
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) and node.node.name == var \
            and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def _path(node: nodes.Node) -> list[str]:
    """The names along an access chain: ``message.content.blocks`` → [message, content, blocks]."""
    keys: list[str] = []
    while True:
        while isinstance(node, nodes.Filter):
            node = node.node
        if isinstance(node, nodes.Getattr):
            keys.append(node.attr)
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) \
                and isinstance(node.arg.value, str):
            keys.append(node.arg.value)
        else:
            return [node.name, *keys[::-1]] if isinstance(node, nodes.Name) else []
        node = node.node


def _block_container(loop: nodes.For, assigned: dict[str, nodes.Node]) -> str | None:
    """Where the blocks ``loop`` walks sit in a message: "" for the content itself, the key under
    the content for a mapping, None when the loop is not over a message's content."""
    it = loop.iter
    while isinstance(it, nodes.Filter):
        it = it.node
    if isinstance(it, nodes.Name) and it.name in assigned:
        it = assigned[it.name]
    keys = _path(it)
    if keys[-1:] == ["content"]:
        return ""
    if keys[-2:-1] == ["content"] and _IDENT.match(keys[-1]):
        return keys[-1]
    return None


def _type_tested(test: nodes.Node, var: str) -> str | None:
    """The constant ``test`` compares ``var``'s type with (``var.type == 'x'``), if it does."""
    for cmp in [test] if isinstance(test, nodes.Compare) else test.find_all(nodes.Compare):
        if len(cmp.ops) != 1 or cmp.ops[0].op != "eq":
            continue
        a, b = cmp.expr, cmp.ops[0].expr
        for key_side, value_side in ((a, b), (b, a)):
            if _key_of(key_side, var) == "type" and isinstance(value_side, nodes.Const) \
                    and isinstance(value_side.value, str) and _IDENT.match(value_side.value):
                return value_side.value
    return None


@lru_cache(maxsize=512)
def content_block_kinds(source: str) -> tuple[BlockKind, ...]:
    """The content blocks ``source`` writes, read from its loops over a message's content: each
    type it tests a block for, with the first key it then reads from the block (the first
    :data:`MAX_BLOCK_KINDS`).

    >>> src = ("{% for b in message.content %}{% if b.type == 'text' %}{{ b.text }}"
    ...        "{% elif b['type'] == 'note' %}<n>{{ b['note'] }}</n>{% endif %}{% endfor %}")
    >>> [(k.container, k.type, k.field) for k in content_block_kinds(src)]
    [('', 'text', 'text'), ('', 'note', 'note')]
    """
    found = _walk(parse_template(source))
    assigned: dict[str, nodes.Node] = {}
    for a in _all(found, nodes.Assign):
        if isinstance(a.target, nodes.Name):
            assigned.setdefault(a.target.name, a.node)
    kinds: dict[BlockKind, None] = {}
    for loop in _all(found, nodes.For):
        if not isinstance(loop.target, nodes.Name):
            continue
        var = loop.target.name
        container = _block_container(loop, assigned)
        if container is None:
            continue
        for branch in (n for stmt in loop.body for n in ([stmt] if isinstance(stmt, nodes.If) else [])
                       + list(stmt.find_all(nodes.If))):
            block_type = _type_tested(branch.test, var)
            if block_type is None:
                continue
            reads = [n for stmt in branch.body for n in stmt.find_all((nodes.Getattr, nodes.Getitem, nodes.Call))]
            called = {id(n.node) for n in reads if isinstance(n, nodes.Call)}  # methods: b.get(..)
            fields = [k for n in reads if id(n) not in called and not isinstance(n, nodes.Call)
                      and (k := _key_of(n, var)) and k != "type" and _IDENT.match(k)]
            if fields:
                kinds.setdefault(BlockKind(container, block_type, fields[0]))
                if len(kinds) == MAX_BLOCK_KINDS:
                    return tuple(kinds)
    return tuple(kinds)


MAX_BLOCK_KINDS = 32  # each kind costs renders; the corpus writes at most 5
