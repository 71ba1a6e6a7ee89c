"""The minijinja worker: a child process that renders templates for :mod:`chat_autoparser.analyzer.minijinja_engine`.

minijinja is Rust. Its loops cannot be interrupted from Python, some of its operations grow
without fuel (``+`` on lists builds lazy chains whose length takes exponential time,
``str.format`` allocates its width before checking it) and an allocation it cannot get aborts
the whole process. So it runs here, in a process with its address space capped
(``RenderLimits.worker_memory_mb`` over its start-up size) and killed by the parent past the
time limit: whatever a template does, the parent gets a typed error and carries on.

Inputs reach templates as read-only views: items and attributes, the read-only ``dict``
methods (``items``, ``keys``, ``values``, ``get``), and no Python method that could change or
grow them (minijinja hands a Python object's public methods to templates).

Protocol (stdin/stdout, one request at a time): a 4-byte little-endian length, then the
request as ``marshal`` data (the parent is trusted) or the reply as JSON (this process runs
untrusted templates). Run as a script; it imports only ``analyzer.errors``, ``.limits`` and
``.bounded``, not the packages.

Example (in-process, the read-only views)::

    >>> view = read_only({"role": "user", "parts": [1]})
    >>> view["parts"][0], view.get("nope", "-"), str(view)
    (1, '-', "{'role': 'user', 'parts': [1]}")
    >>> view["parts"].append
    Traceback (most recent call last):
    ...
    AttributeError: 'ReadOnlySeq' object has no attribute 'append'
"""

from __future__ import annotations

import collections.abc
import json
import marshal
import os
import struct
import sys
import types
from collections import OrderedDict
from datetime import datetime
from typing import Any, Iterator

if __package__ in (None, ""):  # run as a script: load our modules without the packages' __init__
    _here = os.path.dirname(os.path.abspath(__file__))
    _root = types.ModuleType("chat_autoparser")  # installed: the folder above; in a checkout: its chat_autoparser/
    _root.__path__ = [os.path.dirname(_here), os.path.join(os.path.dirname(_here), "chat_autoparser")]
    _pkg = types.ModuleType("chat_autoparser.analyzer")
    _pkg.__path__ = [_here]
    sys.modules.setdefault("chat_autoparser", _root)
    sys.modules.setdefault("chat_autoparser.analyzer", _pkg)

from chat_autoparser.analyzer.bounded import plain_children  # noqa: E402
from chat_autoparser.analyzer.bounded import tojson as bounded_tojson  # noqa: E402
from chat_autoparser.errors import RenderLimitError, TemplateRaised  # noqa: E402
from chat_autoparser.analyzer.limits import RenderLimits, metered  # noqa: E402

MAX_REQUEST = 1 << 30
TEMPLATES_KEPT = 64


# --------------------------------------------------------------------------- read-only views

class _ReadOnly:
    """A read-only window on a list, tuple or dict; what comes out of it is read-only too."""

    __slots__ = ("_v",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any) -> None:
        self._v = value

    def __len__(self) -> int:
        return len(self._v)

    def __contains__(self, item: Any) -> bool:
        return item in self._v

    def __eq__(self, other: Any) -> bool:
        return self._v == (other._v if isinstance(other, _ReadOnly) else other)

    def __str__(self) -> str:
        return str(self._v)

    __repr__ = __str__


class ReadOnlyMap(_ReadOnly):
    """A dict, with the read-only ``dict`` methods minijinja's pycompat offers."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        return read_only(self._v[key])

    def __iter__(self) -> Iterator[Any]:
        return iter(self._v)

    def items(self) -> list[tuple[Any, Any]]:
        return [(k, read_only(v)) for k, v in self._v.items()]

    def keys(self) -> list[Any]:
        return list(self._v)

    def values(self) -> list[Any]:
        return [read_only(v) for v in self._v.values()]

    def get(self, key: Any, default: Any = None) -> Any:
        return read_only(self._v[key]) if key in self._v else default


class ReadOnlySeq(_ReadOnly):
    """A list or tuple (no methods at all)."""

    __slots__ = ()

    def __getitem__(self, index: Any) -> Any:
        item = self._v[index]
        return ReadOnlySeq(item) if isinstance(index, slice) else read_only(item)

    def __iter__(self) -> Iterator[Any]:
        return map(read_only, self._v)

    def __reversed__(self) -> Iterator[Any]:
        return map(read_only, reversed(self._v))


# minijinja treats registered ABCs as maps and sequences without handing over their mixin methods.
collections.abc.Mapping.register(ReadOnlyMap)
collections.abc.Sequence.register(ReadOnlySeq)


def read_only(value: Any) -> Any:
    """``value`` as a template may see it: containers wrapped, scalars as they are."""
    t = type(value)
    if t is dict:
        return ReadOnlyMap(value)
    if t is list or t is tuple:
        return ReadOnlySeq(value)
    return value


def _plain(value: Any) -> Any:
    """The data behind a view (what ``json.dumps`` reaches through ``default``)."""
    if isinstance(value, _ReadOnly):
        return value._v
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _children(value: Any) -> Any:
    return plain_children(value._v if isinstance(value, _ReadOnly) else value)


# --------------------------------------------------------------------------- template functions

_NOW = datetime(2000, 1, 1)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return bounded_tojson(x, ensure_ascii, indent, separators, sort_keys, children=_children, default=_plain)


def _length(value: Any) -> int:
    """jinja2's ``length``/``count``: ``len(value)``, and 0 for an undefined value.

    minijinja's own filter refuses undefined (``message.content|length`` on a message without
    content), which jinja2 counts as 0. Python callbacks receive undefined and none alike as
    ``None``; jinja2 would raise on a real ``None``, but templates guard that case
    (``tools is iterable and tools|length > 0`` with ``tools=None``, and minijinja calls none
    iterable), so 0 is the answer that matches transformers on the corpus.
    """
    return 0 if value is None else len(value)


def _raise(message: Any) -> None:
    raise TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return _NOW.strftime(fmt)


# transformers' ``{% generation %}...{% endgeneration %}`` renders its body unchanged; minijinja
# has no custom tags, so the tags become ``{% if true %}``/``{% endif %}``: the same block-tag
# whitespace handling (trim/lstrip, ``-``/``+`` markers) and the same line numbers.
def minijinja_source(source: str) -> str:
    """``source`` with the ``generation`` tags rewritten for minijinja.

    >>> minijinja_source("{%- generation %}x{% endgeneration -%}")
    '{%- if true %}x{% endif -%}'
    """
    import re
    return re.sub(r"\{%([-+]?)\s*(end)?generation\s*([-+]?)%\}",
                  lambda m: "{%" + m.group(1) + (" endif " if m.group(2) else " if true ") + m.group(3) + "%}",
                  source)


def _environment(source: str, fuel: int) -> Any:
    import minijinja
    env = minijinja.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                                undefined_behavior="lenient", fuel=fuel, pycompat=True)
    env.add_filter("tojson", _tojson)
    env.add_filter("length", _length)
    env.add_filter("count", _length)
    env.add_function("raise_exception", _raise)
    env.add_function("strftime_now", _strftime_now)
    env.add_template("chat", minijinja_source(source))
    return env


# --------------------------------------------------------------------------- requests

def _error(kind: str, message: str, line: Any = None) -> dict[str, Any]:
    return {"error": kind, "message": message, "line": line if isinstance(line, int) else None}


def _failure(e: BaseException) -> dict[str, Any]:
    """A render's exception as a reply (the parent turns it into the matching error type)."""
    import minijinja
    if isinstance(e, minijinja.TemplateError):
        line = getattr(e, "line", None)
        cause = e.__cause__
        if isinstance(cause, TemplateRaised):
            return _error("raised", cause.reason, line)
        if isinstance(cause, RenderLimitError):
            return _error("limit", cause.reason, line)
        kind = getattr(e, "kind", "")
        if kind == "OutOfFuel":
            return _error("fuel", "", line)
        return _error("error", f"minijinja {kind}: {e.message}", line)
    if isinstance(e, TemplateRaised):
        return _error("raised", e.reason)
    if isinstance(e, RenderLimitError):
        return _error("limit", e.reason)
    view = getattr(e, "obj", None)
    if isinstance(e, AttributeError) and isinstance(view, _ReadOnly):
        if hasattr(view._v, e.name):  # a method of the list or dict itself: refused
            return _error("security", f"sandbox refused: input values are read-only ({e.name!r} is not available)")
        return _error("error", f"AttributeError: {type(view._v).__name__!r} object has no attribute {e.name!r}")
    if isinstance(e, (MemoryError, RecursionError)):
        return _error("resource", "out of memory" if isinstance(e, MemoryError) else "recursion too deep")
    return _error("error", f"{type(e).__name__}: {e}")


class Worker:
    """The compiled templates of this process and the requests that use them."""

    def __init__(self) -> None:
        self.envs: OrderedDict[tuple[bytes, int], Any] = OrderedDict()
        self.sources: dict[bytes, str] = {}

    def env(self, key: bytes, source: str | None, fuel: int) -> Any:
        """The environment holding template ``key`` (None when its source must be sent)."""
        if source is not None:
            self.sources[key] = source
        env = self.envs.get((key, fuel))
        if env is None:
            if key not in self.sources:
                return None
            env = _environment(self.sources[key], fuel)
            self.envs[(key, fuel)] = env
            while len(self.envs) > TEMPLATES_KEPT:
                (old, _), _ = self.envs.popitem(last=False)
                if not any(k == old for k, _ in self.envs):
                    self.sources.pop(old, None)
        self.envs.move_to_end((key, fuel))
        return env

    def compile(self, key: bytes, source: str, fuel: int) -> dict[str, Any]:
        import minijinja
        try:
            self.env(key, source, fuel)
        except minijinja.TemplateError as e:
            return _error("syntax", f"minijinja syntax error: {e.message}", getattr(e, "line", None))
        return {"ok": ""}

    def render(self, key: bytes, source: str | None, limits: dict[str, Any], now: tuple,
               context: dict[str, Any]) -> dict[str, Any]:
        global _NOW
        import minijinja
        limits_ = RenderLimits(**limits)
        try:
            env = self.env(key, source, limits_.fuel)
        except minijinja.TemplateError as e:
            return _error("syntax", f"minijinja syntax error: {e.message}", getattr(e, "line", None))
        if env is None:
            return {"need_source": True}
        _NOW = datetime(*now)
        view = {k: read_only(v) for k, v in context.items()}
        try:
            with metered(limits_):
                out = env.render_template("chat", **view)
        except BaseException as e:  # noqa: BLE001 - every failure becomes a reply
            return _failure(e)
        if len(out) > limits_.max_output_chars:
            return _error("limit", f"output over {limits_.max_output_chars} characters")
        return {"ok": out}


# --------------------------------------------------------------------------- process

def _limit_process(memory_mb: int) -> None:
    """Cap this process' address space at its current size plus ``memory_mb``. (It ends with the
    parent by reading the end of its requests; PR_SET_PDEATHSIG would kill it when the *thread*
    that started it ends, while the pool still hands it out.)"""
    try:
        import resource
        with open("/proc/self/status", encoding="ascii") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = vm + memory_mb * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (OSError, ValueError, StopIteration, ImportError):
        pass  # not Linux: the parent's time limit still holds


def _read(stream: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def main() -> int:
    import minijinja  # noqa: F401 - loaded before the memory cap is measured
    _limit_process(int(sys.argv[1]))
    requests = os.fdopen(0, "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing else may write into the reply stream
    worker = Worker()
    replies.write(struct.pack("<I", 0))  # ready: the parent's time limits start from here
    while True:
        try:
            (size,) = struct.unpack("<I", _read(requests, 4))
            if size > MAX_REQUEST:
                return 2
            request = marshal.loads(_read(requests, size))
        except EOFError:
            return 0
        op, args = request[0], request[1:]
        reply = worker.compile(*args) if op == "compile" else worker.render(*args)
        data = json.dumps(reply, ensure_ascii=True).encode("ascii")
        replies.write(struct.pack("<I", len(data)) + data)


if __name__ == "__main__":
    raise SystemExit(main())
