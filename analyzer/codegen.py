"""jinja2 code generation for untrusted templates: nothing is evaluated while compiling, and
the generated code routes output, ``~``, comparisons and loops through the guards.

jinja2 folds constant expressions while it generates code, whether or not the environment is
``optimized``: ``CodeGenerator.visit_Output`` asks every printed expression for
``as_const()``, which runs filters, ``%`` and ``~`` on literal arguments then and there
(``{{ 'x'|center(10**9) }}`` allocated a gigabyte at compile time, outside every render limit,
and the result stayed in the compile cache). Here only template text and literals are taken
as constants; every expression runs at render time, under the limits.

Example::

    >>> from chat_autoparser.analyzer.render import compile_template
    >>> t = compile_template("{{ 'x'|center(1000000000) }}", "immutable")  # at once: nothing ran
    >>> t.render()
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.RenderLimitError: <template>: center result over 2000000 (max_value_size)
"""

from __future__ import annotations

import copy
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, operators

from ..errors import TemplateError
from .limits import current


_HOOKS = {"_loop_iter": "environment.loop_iter(", "_loop_tick": "environment.loop_tick("}


def _hook(name: str, node: nodes.Expr, lineno: int) -> nodes.Filter:
    """A call of a guard (jinja2 allows no new node types: a Filter node with a name of ours,
    which ``visit_Filter`` writes as a direct call of the environment's hook)."""
    return nodes.Filter(node, name, [], [], None, None, lineno=lineno)


def _literal(node: nodes.Node) -> bool:
    """A constant written in the source: comparing with it never walks a container."""
    if isinstance(node, nodes.Const):
        return True
    if isinstance(node, (nodes.List, nodes.Tuple)):
        return all(_literal(item) for item in node.items)
    return False


# What jinja2's code generator searches whole subtrees for, for template inheritance, imports
# and scoped blocks in loops: of the template, and again of every loop's body (nested loops
# over and over). Chat templates seldom have any.
_INHERITANCE = (nodes.Extends, nodes.Block, nodes.ImportedName)


def _survey(roots: Any) -> tuple[set[str], set[str], bool]:
    """The names of the filters and tests used in ``roots`` and below, except inside blocks
    (what jinja2's ``DependencyFinderVisitor`` collects for ``pull_dependencies``), and whether
    any of the ``_INHERITANCE`` nodes is among them."""
    filters: set[str] = set()
    tests: set[str] = set()
    inherits = False
    Node = nodes.Node
    stack = list(roots)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is nodes.Block:
            inherits = True
            continue
        if kind is nodes.Filter:
            filters.add(node.name)
        elif kind is nodes.Test:
            tests.add(node.name)
        elif kind is nodes.Extends or kind is nodes.ImportedName:
            inherits = True
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, Node):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, Node))
    return filters, tests, inherits


def _searched_at_once(node: nodes.Node) -> None:
    """Make ``node`` (a copy the generator alone holds, in a template without inheritance
    nodes) answer searches for them without walking its subtree. jinja2 allows no node
    subclass, so the copy's own ``find_all`` stands in front of the class's."""
    find_all = node.find_all

    def find_all_but_inheritance(node_type: Any) -> Any:
        return iter(()) if node_type in _INHERITANCE else find_all(node_type)

    node.find_all = find_all_but_inheritance  # type: ignore[method-assign]


class GuardedCodeGenerator(CodeGenerator):
    """jinja2's code generator with compile-time evaluation switched off and runtime guards
    (:mod:`chat_autoparser.analyzer.guards`) on output, ``~``, comparisons, dict keys and loops."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = current().limits
        self._max_nesting, self._max_code = limits.max_nesting, limits.max_compiled_chars
        self._nesting = self._literal_chars = 0
        self._root_dependencies: tuple[Any, set[str], set[str]] = ([], set(), set())
        self._inherits = True

    # ---------------------------------------------------------------- the template: one walk, its size

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        filters, tests, inherits = _survey(node.body)
        self._root_dependencies = (node.body, filters, tests)
        self._inherits = inherits
        if not inherits:
            node = copy.copy(node)  # the AST is shared with static inspection: never change it
            _searched_at_once(node)
        super().visit_Template(node, frame)
        # Python's compiler, one C call no timer can interrupt, runs next: its work grows with
        # the code, not with the template text it carries
        if self.stream.tell() - self._literal_chars > self._max_code:
            raise TemplateError(f"template compiles to over {self._max_code} characters of Python code "
                                "(max_compiled_chars; the template's text not counted)")

    def _output_const_repr(self, group: Any) -> str:
        text = super()._output_const_repr(group)
        self._literal_chars += len(text)
        return text

    def blockvisit(self, nodes_: Any, frame: Frame) -> None:
        self._nesting += 1
        try:
            if self._nesting > self._max_nesting + 1:  # + the template's own body
                first = next(iter(nodes_), None)
                raise TemplateError(f"blocks nest over {self._max_nesting} deep (max_nesting)",
                                    line=getattr(first, "lineno", None))
            super().blockvisit(nodes_, frame)
        finally:
            self._nesting -= 1

    def pull_dependencies(self, nodes_: Any) -> None:
        # jinja2 finds the filters and tests a frame uses with a visitor over every node; one
        # plain walk finds the same names, and jinja2 writes their lookups from a node for each
        root, filters, tests = self._root_dependencies
        if nodes_ is not root:  # a block's body
            filters, tests, _ = _survey(nodes_)
        super().pull_dependencies([nodes.Filter(None, name, [], [], None, None) for name in sorted(filters)]
                                  + [nodes.Test(None, name, [], [], None, None) for name in sorted(tests)])

    # ---------------------------------------------------------------- no compile-time evaluation

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        if isinstance(node, (nodes.TemplateData, nodes.Const)):
            return super()._output_child_to_const(node, frame, finalize)
        raise nodes.Impossible()

    def visit_EvalContextModifier(self, node: nodes.EvalContextModifier, frame: Frame) -> None:
        # jinja2 evaluates `{% autoescape expr %}` at compile time; only a literal is known.
        for keyword in node.options:
            self.writeline(f"context.eval_ctx.{keyword.key} = ")
            self.visit(keyword.value, frame)
            if isinstance(keyword.value, nodes.Const):
                setattr(frame.eval_ctx, keyword.key, keyword.value.value)
            else:
                frame.eval_ctx.volatile = True

    # ---------------------------------------------------------------- runtime guards

    # A value printed or compared is measured first. (The generated code stays simple: Python
    # compiles it once per template, and compiling is most of an analysis' time.)

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape or finalize.src is not None:
            super()._output_child_pre(node, frame, finalize)
            self.write("environment.measured(")
        else:
            self.write("environment.guarded_text(")

    def _output_child_post(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape or finalize.src is not None:
            self.write(")")
            super()._output_child_post(node, frame, finalize)
        else:
            self.write(")")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        autoescape = ("context.eval_ctx.autoescape" if frame.eval_ctx.volatile
                      else repr(bool(frame.eval_ctx.autoescape)))
        self.write("environment.guarded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(f"), {autoescape})")

    def _measured(self, node: nodes.Expr, frame: Frame, measure: bool) -> None:
        if measure:
            self.write("environment.measured(")
            self.visit(node, frame)
            self.write(")")
        else:
            self.visit(node, frame)

    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        # Comparing two containers recurses in C (as deep as the left one goes); a side
        # written as a literal cannot take part in that.
        operands = [node.expr] + [op.expr for op in node.ops]
        self.write("(")
        for i, node_ in enumerate(operands):
            if i:
                self.write(f" {operators[node.ops[i - 1].op]} ")
            right = operands[i + 1] if i + 1 < len(operands) else None
            self._measured(node_, frame, right is not None and not _literal(node_) and not _literal(right))
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self.write("{")
        for idx, item in enumerate(node.items):
            if idx:
                self.write(", ")
            self._measured(item.key, frame, not _literal(item.key))  # keys are hashed
            self.write(": ")
            self.visit(item.value, frame)
        self.write("}")

    def visit_Filter(self, node: nodes.Filter, frame: Frame) -> None:
        hook = _HOOKS.get(node.name) if node.name.startswith("_loop_") else None
        if hook is None:
            return super().visit_Filter(node, frame)
        self.write(hook)
        self.visit(node.node, frame)
        self.write(")")

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        node = copy.copy(node)  # the AST is shared with static inspection: never change it
        if not self._inherits:
            _searched_at_once(node)
        if node.recursive:  # nested calls of a recursive loop bypass its iterable: count each step
            tick = _hook("_loop_tick", nodes.Const(None, lineno=node.lineno), node.lineno)
            node.body = [nodes.ExprStmt(tick, lineno=node.lineno), *node.body]
        else:
            node.iter = _hook("_loop_iter", node.iter, node.lineno)
        super().visit_For(node, frame)
