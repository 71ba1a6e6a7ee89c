"""Guarded operations for the jinja2 engine: every operation a template can make allocate in
proportion to an argument is sized first, and every value C code would walk is measured first.

A single C call (``str.center``, ``'%9999999s' % x``, ``json.dumps``, ``str(list)``) cannot be
interrupted by the render watchdog, and its memory is taken before any output limit sees it.
So the size of the result is computed from the arguments, and refused over
``RenderLimits.max_value_size``, before the call; values that are printed, serialised,
compared or hashed are measured by :func:`chat_autoparser.analyzer.bounded.measure`. Results of allowed
operations are exactly jinja2's (the parity test compares every corpus template with
transformers).

The pieces are installed on an environment by :func:`install`; the code generator
(:mod:`chat_autoparser.analyzer.codegen`) routes output, ``~``, comparisons and loops through them.

Example::

    >>> from chat_autoparser.analyzer.limits import RenderLimits, metered
    >>> with metered(RenderLimits(max_value_size=100)):
    ...     center("x", 1_000_000_000)
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.RenderLimitError: <template>: center result over 100 (max_value_size)
    >>> center("x", 5)
    '  x  '
"""

from __future__ import annotations

import itertools
import re
import textwrap
import types
from functools import update_wrapper
from typing import Any, Callable, Iterable

from jinja2 import filters as jf
from jinja2.runtime import markup_join
from jinja2.sandbox import SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_environment, pass_eval_context
from markupsafe import EscapeFormatter, Markup

from .bounded import measure, plain_children, too_big
from .bounded import tojson as bounded_tojson
from ..errors import RenderLimitError
from .limits import current, running

# Exact types that print, compare and hash without walking anything.
PLAIN = frozenset({str, int, float, bool, type(None)})
# Exact types whose printing, comparing or hashing walks their parts (with Namespace).
_WALKED = frozenset({list, tuple, dict, set, frozenset, type({}.keys()), type({}.values()), type({}.items())})
_SEQUENCES = (str, list, tuple)
_BUILTIN_METHOD, _METHOD = types.BuiltinMethodType, types.MethodType


def children(value: Any) -> Iterable[Any] | None:
    """Parts of a value as ``str()`` reaches them: built-in containers and jinja's namespace."""
    parts = plain_children(value)
    if parts is None and isinstance(value, Namespace):
        attrs = object.__getattribute__(value, "_Namespace__attrs")
        return [x for kv in attrs.items() for x in kv]
    return parts


def checked(value: Any) -> Any:
    """``value`` itself, once measured (it is about to be printed, compared or hashed)."""
    if type(value) in _WALKED or isinstance(value, Namespace):
        meter = running.meter
        measure(value, meter.limits, children, meter.known)
    return value


def check_size(size: int, what: str) -> None:
    """Refuse a result of ``size`` characters or items over ``max_value_size``."""
    limit = running.meter.limits.max_value_size
    if size > limit:
        raise too_big(what, "max_value_size", limit)


def text(value: Any) -> str:
    """``str(value)`` for output and ``~``: measured first when it is a container."""
    t = type(value)
    if t is str:
        return value
    if t in _WALKED or isinstance(value, Namespace):
        meter = running.meter
        measure(value, meter.limits, children, meter.known)
    return str(value)


def concat(parts: tuple[Any, ...], autoescape: bool) -> str:
    """jinja2's ``~`` (``str_join`` / ``markup_join``), refused over ``max_value_size``."""
    strings = [p if p.__class__ is str else text(p) for p in parts]
    if sum(map(len, strings)) > running.meter.limits.max_value_size:
        raise too_big("~ result", "max_value_size", running.meter.limits.max_value_size)
    return markup_join(parts) if autoescape else "".join(strings)


def loop_iter(iterable: Any) -> Any:
    """What a ``{% for %}`` loops over, its length charged to ``max_iterations`` first.

    An iterable without a length (a filter's generator) is taken into a list, at most one
    item past the budget, so a loop never starts what it cannot finish.
    """
    meter = running.meter
    limit = meter.limits.max_iterations
    try:
        n = len(iterable)
    except TypeError:
        iterable = list(itertools.islice(iter(iterable), limit - meter.iterations + 1))
        n = len(iterable)
    meter.iterations += n
    if meter.iterations > limit:
        raise RenderLimitError(f"loops ran over {limit} iterations (max_iterations)")
    return iterable


def loop_tick(_: Any = None) -> None:
    """One iteration of a recursive loop (its nested calls bypass :func:`loop_iter`)."""
    meter = current()
    meter.iterations += 1
    if meter.iterations > meter.limits.max_iterations:
        raise RenderLimitError(f"loops ran over {meter.limits.max_iterations} iterations (max_iterations)")


# --------------------------------------------------------------------------- sizes

_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")


def _size(value: Any) -> int:
    """Printed size of one argument (measured when it is a container)."""
    if isinstance(value, str):
        return len(value)
    if type(value) in PLAIN:
        return 32 if not isinstance(value, int) else value.bit_length() // 3 + 2
    meter = current()
    return measure(value, meter.limits, children, meter.known)[0]


def printf_size(fmt: str, args: Any) -> int:
    """An upper bound of ``len(fmt % args)``: the format, every width and precision (``*``
    taken as the largest integer argument) and every argument's printed size.

    >>> printf_size("%-10s|%.3f", ("ab", 1.5)) >= len("%-10s|%.3f" % ("ab", 1.5))
    True
    """
    values = list(args.values()) if isinstance(args, dict) else list(args) if isinstance(args, tuple) else [args]
    star = max((abs(v) for v in values if type(v) is int), default=0)
    size = len(fmt) + sum(_size(v) for v in values)
    for m in _PRINTF.finditer(fmt):
        for field in m.groups():
            if field:
                size += star if field == "*" else int(field)
    return size


def _spec_size(spec: str) -> int:
    """An upper bound of the padding a ``str.format`` spec adds (every number in it)."""
    return sum(int(d) for d in _DIGITS.findall(spec)) if spec else 0


# --------------------------------------------------------------------------- str.format

class _GuardedFormatter(SandboxedFormatter):
    """The sandbox's ``str.format``, with each field measured and the total kept in bounds."""

    _size = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._size = len(format_string)
        return super().vformat(format_string, args, kwargs)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return super().convert_field(checked(value), conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self._size += _size(value) + _spec_size(format_spec)
        check_size(self._size, "str.format result")
        return super().format_field(value, format_spec)


class _GuardedEscapeFormatter(_GuardedFormatter, SandboxedEscapeFormatter, EscapeFormatter):
    pass


# --------------------------------------------------------------------------- string methods

def _method_size(name: str, s: str, args: tuple, kwargs: dict) -> int | None:
    """The result size of a padding/repeating ``str`` method call, None for the others."""
    if name in ("center", "ljust", "rjust", "zfill"):
        width = args[0] if args else kwargs.get("width", 0)
        return max(width, len(s)) if isinstance(width, int) else None
    if name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        return len(s) + s.count("\t") * max(tab, 0) if isinstance(tab, int) else None
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        return _replace_size(s, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count", -1))
    if name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        return len(s) * max(longest, 1)
    return None


def _replace_size(s: str, old: str, new: str, count: Any) -> int:
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * (len(new) - len(old))


def _join_args(sep: str, items: Iterable[Any]) -> list[Any]:
    """``sep.join(items)``'s items as a list, refused when the result would be too long."""
    items = list(items)
    check_size(sum(len(x) for x in items if isinstance(x, str)) + len(sep) * max(len(items) - 1, 0),
               "join result")
    return items


def checked_arguments(args: tuple, kwargs: dict) -> None:
    """Measure every argument (of a call that hashes or compares them, like ``dict(...)``)."""
    for a in itertools.chain(args, kwargs.values()):
        checked(a)


# Built-in methods that compare or hash their first argument with what they hold.
_COMPARES_ARGUMENT = frozenset({"get", "pop", "setdefault", "index", "count", "remove", "__contains__"})


def guard_call(obj: Any, args: tuple, kwargs: dict) -> tuple:
    """Check a call of built-in method ``obj``; returns ``args`` (a join's items listed).

    What it compares or hashes is measured (``dict.get(key)``, ``list.index(x)``); ``str``
    methods that pad, repeat or replace are sized; the relaxed sandbox's ``list.extend`` or
    ``dict.update`` may not grow a value past ``max_value_size``.
    """
    owner, name = obj.__self__, obj.__name__
    if isinstance(owner, str):
        if name == "join" and args:
            return (_join_args(owner, args[0]),) + args[1:]
        size = _method_size(name, owner, args, kwargs)
        if size is not None:
            check_size(size, f"str.{name} result")
    elif name in _COMPARES_ARGUMENT:
        if args and type(args[0]) not in PLAIN:
            checked(args[0])
    elif isinstance(owner, (list, dict)):
        if name == "sort":
            checked(owner)
        elif name in ("extend", "update", "append", "insert") and args:
            added = len(args[0]) if hasattr(args[0], "__len__") and name != "append" else 1
            check_size(len(owner) + added, f"{type(owner).__name__}.{name} result")
    return args


# --------------------------------------------------------------------------- filters

def center(value: Any, width: int = 80) -> str:
    size = len(value) if isinstance(value, str) else len(text(value))
    if isinstance(width, int):
        check_size(max(width, size), "center result")
    return jf.do_center(value, width)


def indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    if isinstance(s, str):
        w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        check_size(len(s) + (s.count("\n") + 2) * max(w, 0), "indent result")
    return jf.do_indent(s, width, first, blank)


def format_(value: Any, *args: Any, **kwargs: Any) -> str:
    check_size(printf_size(text(value), kwargs or args), "format result")
    return jf.do_format(value, *args, **kwargs)


@pass_eval_context
def join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    if attribute is not None:
        value = map(jf.make_attrgetter(eval_ctx.environment, attribute), value)
    sep = text(d)
    # containers become their (measured) text; anything else stays as it is (Markup stays safe)
    items = [text(x) if type(x) in _WALKED or isinstance(x, Namespace) else x for x in value]
    check_size(sum(len(str(x)) for x in items) + len(sep) * max(len(items) - 1, 0), "join result")
    return jf.sync_do_join(eval_ctx, items, d)


@pass_eval_context
def replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    s_ = s if type(s) is str else text(s)
    new_ = new if type(new) is str else text(new)
    if len(s_) + (len(s_) + 1) * len(new_) > running.meter.limits.max_value_size:  # only then count
        check_size(_replace_size(s_, text(old), new_, count), "replace result")
    return jf.do_replace(eval_ctx, s, old, new, count)


_RUNS = re.compile(r"\S+|\s+")


@pass_environment
def wordwrap(environment: Any, s: str, width: int = 79, break_long_words: bool = True,
             wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    """jinja2's ``wordwrap`` with its cost bounded: ``textwrap`` spends about ten times a
    string's length in Python, and slices a long word once per line it fills (each run's
    length squared over the width)."""
    if isinstance(s, str) and isinstance(width, int) and width > 0:
        limit = current().limits.max_value_size
        work = 10 * len(s)
        if work <= limit < work + len(s) ** 2 // width:
            work += sum(len(run) ** 2 for run in _RUNS.findall(s)) // width
        if work > limit:
            raise too_big("wordwrap work", "max_value_size", limit)
    if wrapstring is None:
        wrapstring = environment.newline_sequence
    paragraphs = [textwrap.wrap(line, width=width, expand_tabs=False, replace_whitespace=False,
                                break_long_words=break_long_words, break_on_hyphens=break_on_hyphens)
                  for line in s.splitlines()]
    lines = sum(len(p) for p in paragraphs) + len(paragraphs)
    check_size(sum(len(x) for p in paragraphs for x in p) + lines * len(wrapstring), "wordwrap result")
    return wrapstring.join([wrapstring.join(p) for p in paragraphs])


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """transformers' ``tojson``, measured first (:func:`chat_autoparser.analyzer.bounded.tojson`)."""
    return bounded_tojson(x, ensure_ascii, indent, separators, sort_keys, children=children)


def string(value: Any) -> Any:
    return jf.soft_str(checked(value))


def batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    if fill_with is not None and isinstance(linecount, int):
        check_size(linecount, "batch size")
    return jf.do_batch(value, linecount, fill_with)


def slice_(value: Any, slices: int, fill_with: Any = None) -> Any:
    if isinstance(slices, int):
        check_size(slices, "slice count")  # one list per slice
    return jf.sync_do_slice(value, slices, fill_with)


@pass_environment
def sum_(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """jinja2's ``sum``; sequences are joined in one pass (``sum(lists, [])`` copies the
    growing result once per item, in C)."""
    if attribute is not None:
        iterable = map(jf.make_attrgetter(environment, attribute), iterable)
    if isinstance(start, (list, tuple)):
        items = list(iterable)
        check_size(len(start) + sum(len(i) for i in items if hasattr(i, "__len__")), "sum result")
        if all(type(i) is type(start) for i in items):
            return type(start)(itertools.chain(start, *items))
        return sum(items, start)
    return sum(iterable, start)


def _measures_input(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` with its input value measured first (filters that print, compare or hash it)."""
    offset = 1 if hasattr(f, "jinja_pass_arg") else 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > offset and type(args[offset]) not in PLAIN:
            checked(args[offset])
        return f(*args, **kwargs)

    return update_wrapper(wrapper, f)


_MEASURED_FILTERS = ("upper", "lower", "trim", "title", "capitalize", "safe", "e", "escape", "forceescape",
                     "urlencode", "urlize", "wordcount", "striptags", "truncate", "xmlattr", "pprint", "sort",
                     "unique", "min", "max", "groupby", "dictsort")
_MEASURED_TESTS = ("eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan",
                   ">", "ge", ">=", "in")

FILTERS: dict[str, Callable[..., Any]] = {
    "center": center, "indent": indent, "format": format_, "join": join, "replace": replace,
    "wordwrap": wordwrap, "tojson": tojson, "string": string, "batch": batch, "slice": slice_, "sum": sum_,
}


def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - jinja's names
    """jinja2's ``lipsum``, sized first (about 12 characters a word)."""
    if isinstance(n, int) and isinstance(max, int):
        check_size(n * (max if max > 0 else 0) * 12, "lipsum result")
    return generate_lorem_ipsum(n, html, min, max)


def install(env: Any) -> None:
    """Put the guarded filters, tests, globals and code-generator hooks on ``env``."""
    env.filters.update(FILTERS)
    for name in _MEASURED_FILTERS:
        env.filters[name] = _measures_input(env.filters[name])
    for name in _MEASURED_TESTS:
        env.tests[name] = _measures_input(env.tests[name])
    env.globals["lipsum"] = lipsum
    # called by the generated code (analyzer.codegen)
    env.guarded_text, env.guarded_concat, env.measured = text, concat, checked
    env.loop_iter, env.loop_tick = loop_iter, loop_tick


# Built-in methods whose calls are checked (see guard_call), by the type that owns them.
_GUARDED_STR = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "replace", "translate", "join"})
_GUARDED_CONTAINER = _COMPARES_ARGUMENT | {"sort", "extend", "update", "append", "insert"}


def wrap_method(env: Any, value: Any) -> Callable[..., Any] | None:
    """What the sandbox hands a template for a method it reads (None: the method itself).

    jinja2 calls this hook (``wrap_str_format``) on every attribute a template reads, so a
    method is guarded however it is called later: ``str.format``/``format_map`` through the
    guarded formatter, and the built-in methods :func:`guard_call` checks.
    """
    t = type(value)
    if t is _BUILTIN_METHOD:
        owner, name = value.__self__, value.__name__
        if isinstance(owner, str):
            if name in ("format", "format_map"):
                return _format_wrapper(env, value)
            if name not in _GUARDED_STR:
                return None
        elif name not in _GUARDED_CONTAINER:
            return None
        # jinja2 asks this before its own safety check (str.format is always allowed): a
        # method the sandbox refuses (list.append in the immutable one) stays refused
        if not env.is_safe_attribute(owner, name, value):
            return None

        def guarded(*args: Any, **kwargs: Any) -> Any:
            return value(*guard_call(value, args, kwargs), **kwargs)

        return guarded
    if t is _METHOD and value.__name__ in ("format", "format_map") and isinstance(value.__self__, str):
        return _format_wrapper(env, value)  # Markup.format
    return None


def _format_wrapper(env: Any, value: Any) -> Callable[..., str]:
    """The sandbox's ``str.format``/``format_map`` wrapper, with the guarded formatter."""
    f_self = value.__self__
    str_type = type(f_self)
    is_format_map = value.__name__ == "format_map"
    formatter = (_GuardedEscapeFormatter(env, escape=f_self.escape) if isinstance(f_self, Markup)
                 else _GuardedFormatter(env))

    def wrapper(*args: Any, **kwargs: Any) -> str:
        if is_format_map:
            if kwargs:
                raise TypeError("format_map() takes no keyword arguments")
            if len(args) != 1:
                raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
            kwargs = args[0]
            args = ()
        return str_type(formatter.vformat(f_self, args, kwargs))

    return update_wrapper(wrapper, value)


_DICT_ATTRIBUTES = frozenset(dir(dict))  # a dict instance has these attributes and no others


class GuardedOps:
    """Environment mixin: guarded ``*``, ``**``, ``+`` and ``%``, and guarded methods
    (:func:`wrap_method`). Results of allowed operations are exactly Python's."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "+":
            if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
                limit = running.meter.limits.max_value_size
                if len(left) + len(right) > limit:
                    raise RenderLimitError(f"concatenation result is over the size limit of {limit} "
                                           "(max_value_size)")
        elif operator == "%":
            if isinstance(left, str):
                check_size(printf_size(left, right), "% formatting result")
        elif operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, _SEQUENCES) and isinstance(n, int) and not isinstance(n, bool):
                    limit = current().limits.max_value_size
                    if len(seq) * max(n, 0) > limit:
                        raise RenderLimitError(f"sequence repetition of {len(seq)} x {n} items is over the "
                                               f"limit of {limit} (max_value_size)")
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
                bits = current().limits.max_int_bits
                if abs(left).bit_length() * right > bits:
                    raise RenderLimitError(f"{left} ** {right} is over the limit of {bits} bits (max_int_bits)")
        return self.binop_table[operator](left, right)  # type: ignore[attr-defined]

    wrap_str_format = wrap_method  # jinja2's hook on every attribute read (see wrap_method)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # ``message.role``: a name a dict has no attribute by is its item (what jinja2's sandbox
        # finds after the attribute lookup fails), read without raising AttributeError first
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)  # type: ignore[attr-defined]
        return super().getattr(obj, attribute)  # type: ignore[misc]

