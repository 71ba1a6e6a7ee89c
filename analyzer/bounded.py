"""Measure a value before C code walks it, and transformers' ``tojson`` under that measure.

Printing, serialising, comparing and hashing a list or dict recurse in C, where no timer can
interrupt them. A template can build a value that is small in memory but huge as a tree:
``{% set a = [a, a] %}`` 64 times is 64 lists and 2**64 items when printed. :func:`measure`
walks a value the way that C code would (shared parts counted each time they are reached),
in Python and under the limits, and refuses it before anything is built.

This module imports nothing but the project's errors and limits, so the minijinja worker
process can load it without the rest of the package.

Example::

    >>> measure({"a": [1, "xy"]}, RenderLimits())
    (21, 5, 2)
    >>> shared = [1]
    >>> for _ in range(64):
    ...     shared = [shared, shared]
    >>> measure(shared, RenderLimits())
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.RenderLimitError: <template>: value has over 100000 items and containers (max_value_nodes)
    >>> tojson({"b": 1, "a": "<x>"})
    '{"b": 1, "a": "<x>"}'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Callable, Iterable

from ..errors import RenderLimitError
from .limits import RenderLimits, current

# Printed size of scalars: a generous estimate (the real size is checked where it matters).
_SCALAR_SIZE = {bool: 5, type(None): 4, float: 24}
_SEQUENCES = (list, tuple, set, frozenset, type({}.keys()), type({}.values()))
_ITEMS = type({}.items())
_LEAVES = frozenset({str, int, float, bool, type(None), bytes, range})

# children(value) -> the parts a container prints, or None for a leaf. The jinja2 engine
# adds its Namespace, the minijinja worker its read-only views.
Children = Callable[[Any], "Iterable[Any] | None"]


def plain_children(value: Any) -> Iterable[Any] | None:
    """The parts of the built-in containers (dict keys and values alike), None for others."""
    t = type(value)
    if t in _LEAVES:
        return None
    if isinstance(value, Mapping):
        return [x for kv in value.items() for x in kv]
    if isinstance(value, _SEQUENCES):
        return value
    if isinstance(value, _ITEMS):
        return [x for kv in value for x in kv]
    return None


def too_big(what: str, field: str, limit: int) -> RenderLimitError:
    """The error for a value over a limit, naming the :class:`RenderLimits` field to raise."""
    return RenderLimitError(f"{what} over {limit} ({field})")


Measure = tuple[int, int, int]  # (printed size estimate, nodes, depth)


def _leaf_size(v: Any) -> int:
    t = type(v)
    if t is str:
        return len(v) + 2
    if t is int:
        return v.bit_length() // 3 + 2
    if t in _SCALAR_SIZE:
        return _SCALAR_SIZE[t]
    return len(v) + 2 if isinstance(v, str) else 32


def measure(value: Any, limits: RenderLimits, children: Children = plain_children,
            known: dict[int, Measure] | None = None) -> Measure:
    """``(printed size estimate, nodes, depth)`` of ``value``, or RenderLimitError when it is
    over ``max_value_nodes``, ``max_value_depth`` or ``max_value_size``.

    Nodes count containers and items as a tree (a part reached twice counts twice), which is
    the work ``str()``, ``json.dumps`` or ``==`` would do; the walk itself stops at the limit.
    ``known`` gives the measure of containers that cannot have changed (:func:`tree_measures`).
    """
    max_nodes, max_depth, max_size = limits.max_value_nodes, limits.max_value_depth, limits.max_value_size
    size = nodes = depth = 0
    stack = [(value, 0)]  # containers only: scalars are counted where they are met
    push = stack.append
    while stack:
        v, d = stack.pop()
        t = type(v)
        if t is dict or t is list or t is tuple:  # the common containers, inline (this is hot)
            if known is not None:
                hit = known.get(id(v))
                if hit is not None:
                    size += hit[0]
                    nodes += hit[1]
                    if d + hit[2] > depth:
                        depth = d + hit[2]
                        if depth > max_depth:
                            raise RenderLimitError(f"value nests over {max_depth} levels (max_value_depth)")
                    continue
            parts: Any = v.values() if t is dict else v
            if t is dict:
                for k in v:  # keys: strings nearly always
                    if type(k) is str:
                        size += len(k) + 6
                        nodes += 1
                    else:
                        push((k, d + 1))
        else:
            parts = children(v)
            if parts is None:  # a leaf at the top
                nodes += 1
                size += _leaf_size(v)
                continue
        nodes += 1
        if d >= max_depth:
            raise RenderLimitError(f"value nests over {max_depth} levels (max_value_depth)")
        d += 1
        if d > depth:
            depth = d
        size += 2
        for x in parts:
            tx = type(x)
            if tx is str:
                size += len(x) + 4
            elif tx is int:
                size += x.bit_length() // 3 + 4
            elif tx in _SCALAR_SIZE:
                size += _SCALAR_SIZE[tx] + 2
            else:
                push((x, d))
                continue
            nodes += 1
            if d > depth:
                depth = d
        if nodes > max_nodes or len(stack) > max_nodes:
            raise RenderLimitError(f"value has over {max_nodes} items and containers (max_value_nodes)")
        if size > max_size:
            raise too_big("value printed or serialised is", "max_value_size", max_size)
    if nodes > max_nodes:
        raise RenderLimitError(f"value has over {max_nodes} items and containers (max_value_nodes)")
    if size > max_size:
        raise too_big("value printed or serialised is", "max_value_size", max_size)
    return size, nodes, depth


def tree_measures(value: Any) -> dict[int, Measure]:
    """The measure of every dict, list and tuple in ``value`` by ``id()``, in one pass, as
    :func:`measure` would find it (``value`` must be a tree of plain data that nothing will
    change while the result is used, and stay alive as long).

    >>> data = {"f": [1, "xy", {"k": None}], "g": (), 3: [[2.5]]}
    >>> tree_measures(data)[id(data)] == measure(data, RenderLimits())
    True
    >>> measure([data, data], RenderLimits(), known=tree_measures(data)) == measure([data, data], RenderLimits())
    True
    """
    out: dict[int, Measure] = {}

    def visit(v: Any) -> Measure:
        size, nodes, depth = 2, 1, 0  # depth: of the deepest container below, as measure() counts
        if type(v) is dict:
            for k in v:
                if type(k) is str:
                    size, nodes = size + len(k) + 6, nodes + 1
                elif type(k) is tuple:
                    ks, kn, kd = visit(k)
                    size, nodes, depth = size + ks, nodes + kn, max(depth, kd)
                else:
                    size, nodes = size + _leaf_size(k), nodes + 1
            parts: Any = v.values()
        else:
            parts = v
        for x in parts:
            tx = type(x)
            if tx is dict or tx is list or tx is tuple:
                xs, xn, xd = visit(x)
                size, nodes, depth = size + xs, nodes + xn, max(depth, xd)
            elif tx is str or tx is int or tx in _SCALAR_SIZE:
                size, nodes = size + _leaf_size(x) + 2, nodes + 1
            else:
                size, nodes = size + _leaf_size(x), nodes + 1
        result = out[id(v)] = (size, nodes, depth + 1)
        return result

    if type(value) not in (dict, list, tuple):
        return out
    try:
        visit(value)
    except RecursionError:  # deeper than Python recurses: measure it when used instead
        return {}
    return out


def tojson(x: Any, ensure_ascii: bool = False, indent: int | str | None = None,
           separators: tuple[str, str] | None = None, sort_keys: bool = False, *,
           children: Children = plain_children, default: Callable[[Any], Any] | None = None) -> str:
    """transformers' ``tojson`` (plain ``json.dumps``: no HTML escaping, keys in input order),
    refused before encoding when the value, its ``indent`` or its ``separators`` would make
    the text larger than ``max_value_size``.

    >>> tojson([1, [2]], indent=300_000_000)
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.RenderLimitError: <template>: tojson indent over 2000000 (max_value_size)
    """
    meter = current()
    limits = meter.limits
    if type(x) is str and (indent is None or indent == 0) and separators is None:
        if len(x) * 12 > limits.max_value_size:  # \uXXXX\uXXXX: 12 characters at most for one
            measure(x, limits)
        return json.dumps(x, ensure_ascii=ensure_ascii)
    texts = meter.texts
    if (texts is not None and default is None and id(x) in meter.known  # type: ignore[operator]
            and type(ensure_ascii) is bool and type(sort_keys) is bool
            and (indent is None or type(indent) is int or type(indent) is str)
            and (separators is None or type(separators) is tuple)):
        # one of the containers that cannot change (the caller's tools), with arguments whose
        # equal values write alike: written once
        try:
            key = (id(x), ensure_ascii, indent, separators, sort_keys)
            text = texts.get(key)
        except TypeError:  # separators that cannot key a dict (holding a list)
            pass
        else:
            if text is None:
                text = texts[key] = _dumps(x, limits, meter.known, ensure_ascii, indent, separators, sort_keys,
                                           children, default)
            return text
    return _dumps(x, limits, meter.known, ensure_ascii, indent, separators, sort_keys, children, default)


def _dumps(x: Any, limits: RenderLimits, known: dict[int, Measure] | None, ensure_ascii: bool,
           indent: int | str | None, separators: tuple[str, str] | None, sort_keys: bool,
           children: Children, default: Callable[[Any], Any] | None) -> str:
    """``json.dumps`` with tojson's arguments, refused first when the text would be too large."""
    size, nodes, depth = measure(x, limits, children, known)
    width = indent if isinstance(indent, int) else len(indent) if isinstance(indent, str) else 0
    if width > limits.max_value_size:  # json.dumps builds the indent string first
        raise too_big("tojson indent", "max_value_size", limits.max_value_size)
    extra = 0
    if indent is not None:
        extra += nodes * (depth * max(width, 0) + 1)
    if separators is not None:
        extra += nodes * sum(len(s) for s in separators if isinstance(s, str))
    if size + extra > limits.max_value_size:
        raise too_big("tojson text", "max_value_size", limits.max_value_size)
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys, default=default)
