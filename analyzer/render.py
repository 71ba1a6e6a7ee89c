"""Render chat templates exactly as Hugging Face transformers does, under limits.

Two engines share one interface (:class:`Renderer`):

* ``jinja2`` — the reference. Environment, globals, ``tojson`` and input preprocessing
  follow transformers 5.x ``apply_chat_template(..., tokenize=False)``: immutable sandbox,
  ``trim_blocks``/``lstrip_blocks``, loop controls, the ``{% generation %}`` tag,
  ``raise_exception``, ``strftime_now``, HF's ``tojson`` (no HTML escaping, keys unsorted,
  ``ensure_ascii=False``), ``None``-valued message keys dropped, inputs rebuilt from plain
  JSON types, reasoning aliased across ``reasoning_content``/``thinking``/``reasoning``.
* ``minijinja`` — a second engine, ~100x faster to compile, with an instruction budget
  (fuel). It departs from HF in a few filters; use it as a cross-check or a guard.

Templates are untrusted code. Every render runs with a wall-time limit (a watchdog thread
interrupts the rendering thread), an output-size limit, guarded ``*``/``**`` operators and
a recursion guard; going over one raises :class:`RenderLimitError`.

Example::

    >>> from analyzer.load import from_string
    >>> r = make_renderer(from_string("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"))
    >>> r.render([{"role": "user", "content": "hi"}])
    '[user]hi'
"""

from __future__ import annotations

import ctypes
import dataclasses
import heapq
import itertools
import json
import re
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable, Protocol, Sequence

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

from .errors import RenderError, RenderLimitError, TemplateError, TemplateRaised
from .load import SPECIAL_TOKEN_KEYS, LoadedTemplate

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


@dataclasses.dataclass(frozen=True, slots=True)
class RenderLimits:
    """Limits for one render of an untrusted template."""

    timeout_s: float = 2.0
    max_output_chars: int = 2_000_000
    fuel: int = 2_000_000  # minijinja instruction budget; probes need 100-3,000


DEFAULT_LIMITS = RenderLimits()


class Renderer(Protocol):
    engine: str
    template: LoadedTemplate

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str: ...


# --------------------------------------------------------------------------- preprocessing

def plain_data(value: Any) -> Any:
    """Rebuild ``value`` from plain JSON types, as transformers does before rendering.

    Anything that is not JSON-like becomes an inert ``"<TypeName>"`` placeholder.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return plain_data(value.model_dump())
    return f"<{type(value).__name__}>"


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop ``None``-valued keys, rebuild as plain data, alias reasoning fields (as transformers)."""
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise RenderError(f"message {i} is not a mapping ({type(msg).__name__})")
        m = plain_data({k: v for k, v in msg.items() if v is not None})
        reasoning = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def template_special_tokens(special_tokens: Mapping[str, Any]) -> dict[str, str]:
    """The special tokens transformers 5 passes to a template: ``tokenizer.special_tokens_map``.

    That map holds only the named tokens (bos/eos/unk/sep/pad/cls/mask) that are set, each as
    ``str``; ``additional_special_tokens`` (``extra_special_tokens`` in v5) is *not* passed,
    so a template reading it sees an undefined value. The loader keeps the extra tokens for
    other uses; they are filtered here.
    """
    return {k: str(v) for k, v in special_tokens.items() if k in SPECIAL_TOKEN_KEYS and v is not None}


def _render_context(template: LoadedTemplate, messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Any] | None, documents: Sequence[Any] | None,
                    add_generation_prompt: bool, kwargs: Mapping[str, Any],
                    plain_tools: list[Any] | None = None) -> dict[str, Any]:
    """The variables a template sees, built as ``apply_chat_template`` builds them.

    Special tokens first, then the caller's kwargs (which override them), then the fixed
    names; every input is rebuilt from plain data.
    """
    return {
        **template_special_tokens(template.special_tokens),
        **plain_data(dict(kwargs)),
        "messages": prepare_messages(messages),
        "tools": (plain_tools if plain_tools is not None else plain_data(list(tools))) if tools is not None else None,
        "documents": plain_data(list(documents)) if documents is not None else None,
        "add_generation_prompt": add_generation_prompt,
    }


def hf_tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
              separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """transformers' ``tojson``: plain ``json.dumps``, no HTML escaping, keys in input order."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


# --------------------------------------------------------------------------- time limit

class _RenderTimeout(BaseException):
    """Injected into a rendering thread by the watchdog. BaseException so templates and
    jinja internals (which catch ``Exception``) cannot swallow it."""


class _Watchdog:
    """One daemon thread that interrupts renders running past their deadline.

    Arming costs a lock and a heap push, so the limit is cheap enough to apply to every
    probe render. The interrupt is an asynchronous exception, delivered at the next Python
    bytecode of the rendering thread (jinja2 templates compile to Python, so loops are
    interruptible).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, int] = {}  # token -> thread id
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="render-watchdog", daemon=True)
            self._thread.start()

    def arm(self, timeout_s: float) -> int:
        token = next(self._tokens)
        with self._cond:
            self._ensure_thread()
            self._armed[token] = threading.get_ident()
            heapq.heappush(self._heap, (time.monotonic() + timeout_s, token))
            self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching ``token``; True when it had fired (any pending interrupt is cleared)."""
        with self._cond:
            tid = self._armed.pop(token, None)
            fired = token in self._fired
            self._fired.discard(token)
        if fired and tid is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None)
        return fired

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                tid = self._armed.get(token)
                if tid is not None and token not in self._fired:
                    self._fired.add(token)
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid),
                                                               ctypes.py_object(_RenderTimeout))


_WATCHDOG = _Watchdog()


# --------------------------------------------------------------------------- jinja2 engine

class _GenerationTag(jinja2.ext.Extension):
    """transformers' ``{% generation %}...{% endgeneration %}``: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


def _raise_exception(message: Any) -> None:
    raise TemplateRaised(str(message))


class _TemplateDict:
    """transformers' ``dict`` global: callable, with ``fromkeys``, nothing else reachable."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """transformers' ``namespace``: refuses attribute names starting with ``_``."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # same signature trick as jinja's Namespace
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"Chat templates cannot store underscore-prefixed attributes on a "
                                f"namespace, but got {name!r}. Please rename the attribute.")


class _GuardedOps:
    """Mixin: intercept ``*``, ``**`` and ``+`` so ``'x' * 10**9``, ``9**(9**9)`` or doubling a
    string in a loop fail fast instead
    of exhausting memory or CPU inside a single C call that no timer can interrupt. The
    results of allowed operations are exactly Python's."""

    intercepted_binops = frozenset(["*", "**", "+"])
    max_sequence = 2_000_000
    max_exponent_bits = 4096

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and not isinstance(n, bool):
                    if len(seq) * max(n, 0) > self.max_sequence:
                        raise RenderLimitError(f"sequence repetition of {len(seq)} x {n} items is over the limit")
        elif operator == "+":
            if isinstance(left, (str, list)) and isinstance(right, (str, list)):
                if len(left) + len(right) > self.max_sequence:
                    raise RenderLimitError("concatenation result is over the size limit")
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
                if abs(left).bit_length() * right > self.max_exponent_bits:
                    raise RenderLimitError(f"{left} ** {right} is over the limit")
        return self.binop_table[operator](left, right)  # type: ignore[attr-defined]


class _HFEnvironment(_GuardedOps, ImmutableSandboxedEnvironment):
    pass


class _RelaxedEnvironment(_GuardedOps, SandboxedEnvironment):
    """Mutable sandbox: lets ``list.append`` through. Used only as a recorded fallback for
    templates that transformers' own sandbox cannot render."""


def _environment(sandbox: str) -> SandboxedEnvironment:
    cls = _HFEnvironment if sandbox == "immutable" else _RelaxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    # Constant folding changes no output (the parity test checks every corpus template against
    # transformers) and costs ~40% of compile time.
    env.optimized = False
    env.filters["tojson"] = hf_tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


_ENVIRONMENTS = {"immutable": _environment("immutable"), "relaxed": _environment("relaxed")}


@lru_cache(maxsize=512)
def parse_template(source: str) -> jinja2.nodes.Template:
    """The jinja2 AST of ``source`` (cached; raises TemplateSyntaxError)."""
    return _ENVIRONMENTS["immutable"].parse(source)


@lru_cache(maxsize=512)
def _compile(source: str, sandbox: str) -> jinja2.Template:
    # Parse once: the AST also serves static inspection (analyzer.template_info).
    return _ENVIRONMENTS[sandbox].from_string(parse_template(source))


def _template_line(tb: Any) -> int | None:
    """The template line of the innermost template frame in a traceback (jinja rewrites frames)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def compile_error(source: str, name: str, engine: str = "jinja2") -> TemplateError | None:
    """The syntax error of ``source`` under ``engine`` as a TemplateError, or None if it compiles."""
    try:
        if engine == "jinja2":
            _compile(source, "immutable")
        else:
            _minijinja_env(source, DEFAULT_LIMITS.fuel)
    except TemplateError as e:
        return e
    except TemplateSyntaxError as e:
        return TemplateError(f"Jinja syntax error: {e.message}", template=name, line=e.lineno)
    return None


class Jinja2Renderer:
    """The reference engine: transformers' rendering, plus limits.

    ``sandbox="relaxed"`` uses a mutable sandbox (``list.append`` allowed); the analyzer uses
    it only to retry a probe the reference refuses, and records that it did.
    ``now`` pins the clock behind ``strftime_now`` (the analyzer pins it so that two renders
    never straddle midnight).
    """

    engine = "jinja2"

    def __init__(self, template: LoadedTemplate, *, limits: RenderLimits = DEFAULT_LIMITS,
                 sandbox: str = "immutable", now: Callable[[], datetime] | None = None,
                 reuse_tools: bool = False) -> None:
        self.template = template
        self.limits = limits
        self.sandbox = sandbox
        # reuse_tools: the caller passes the same, never-mutated tools list many times (probing)
        self.reuse_tools = reuse_tools
        self._tools_src: Any = None
        self._tools_plain: list[Any] | None = None
        self._now = now or datetime.now
        if sandbox == "relaxed":
            self.engine = "jinja2-relaxed"

    def _compiled(self, tools: bool) -> jinja2.Template:
        source = self.template.source_for(tools=tools)
        try:
            return _compile(source, self.sandbox)
        except TemplateSyntaxError as e:
            raise TemplateError(f"Jinja syntax error: {e.message}", template=self.template.name,
                                line=e.lineno) from None
        except RecursionError:
            raise TemplateError("template nests too deeply to compile", template=self.template.name) from None

    def compile(self) -> None:
        """Compile every variant now, so syntax errors surface as TemplateError."""
        for src in set(self.template.variants.values()):
            try:
                _compile(src, self.sandbox)
            except TemplateSyntaxError as e:
                raise TemplateError(f"Jinja syntax error: {e.message}", template=self.template.name,
                                    line=e.lineno) from None

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str:
        compiled = self._compiled(tools is not None)
        plain_tools = None
        if self.reuse_tools and tools is not None and self.sandbox == "immutable":
            # the immutable sandbox cannot change the converted list, so it can serve again
            if self._tools_src is not tools:
                self._tools_src, self._tools_plain = tools, plain_data(list(tools))
            plain_tools = self._tools_plain
        context = _render_context(self.template, messages, tools, documents, add_generation_prompt, kwargs,
                                  plain_tools)
        now = self._now
        context.setdefault("strftime_now", lambda fmt: now().strftime(fmt))
        return self._run(compiled, context)

    def _run(self, compiled: jinja2.Template, context: dict[str, Any]) -> str:
        name = self.template.name
        limit = self.limits.max_output_chars
        token = _WATCHDOG.arm(self.limits.timeout_s)
        fired = False
        try:
            try:
                pieces: list[str] = []
                size = 0
                for piece in compiled.generate(context):
                    size += len(piece)
                    if size > limit:
                        raise RenderLimitError(f"output over {limit} characters", template=name)
                    pieces.append(piece)
                return "".join(pieces)
            finally:
                fired = _WATCHDOG.disarm(token)
        except _RenderTimeout:
            fired = True
        except RenderLimitError as e:
            raise RenderLimitError(e.reason, template=name, line=_template_line(e.__traceback__)) from None
        except TemplateRaised as e:
            raise TemplateRaised(e.reason, template=name, line=_template_line(e.__traceback__)) from None
        except RecursionError:
            raise RenderLimitError("recursion too deep", template=name) from None
        except MemoryError:
            raise RenderLimitError("out of memory", template=name) from None
        except SecurityError as e:
            raise RenderError(f"sandbox refused: {e}", template=name,
                              line=_template_line(e.__traceback__)) from None
        except UndefinedError as e:
            raise RenderError(f"undefined value: {e}", template=name,
                              line=_template_line(e.__traceback__)) from None
        except jinja2.TemplateError as e:
            raise RenderError(f"{type(e).__name__}: {e}", template=name,
                              line=_template_line(e.__traceback__)) from None
        except Exception as e:  # template code can raise anything a Python operation can
            raise RenderError(f"{type(e).__name__}: {e}", template=name,
                              line=_template_line(e.__traceback__)) from None
        finally:
            fired = _WATCHDOG.disarm(token) or fired  # idempotent; covers an interrupt inside disarm
            if fired:
                raise RenderLimitError(f"render took over {self.limits.timeout_s:g} s", template=name)
        raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- minijinja engine

def _mj_raise(message: Any) -> None:
    raise TemplateRaised(str(message))


def _mj_length(value: Any) -> int:
    """jinja2's ``length``/``count``: ``len(value)``, and 0 for an undefined value.

    minijinja's own filter refuses undefined (``message.content|length`` on a message without
    content), which jinja2 counts as 0. Python callbacks receive undefined and none alike as
    ``None``; jinja2 would raise on a real ``None``, but templates guard that case
    (``tools is iterable and tools|length > 0`` with ``tools=None``, and minijinja calls none
    iterable), so 0 is the answer that matches transformers on the corpus.
    """
    return 0 if value is None else len(value)


# transformers' ``{% generation %}...{% endgeneration %}`` renders its body unchanged; minijinja
# has no custom tags, so the tags become ``{% if true %}``/``{% endif %}``: the same block-tag
# whitespace handling (trim/lstrip, ``-``/``+`` markers) and the same line numbers.
_GENERATION_TAG = re.compile(r"\{%([-+]?)\s*(end)?generation\s*([-+]?)%\}")


def _minijinja_source(source: str) -> str:
    """``source`` with the ``generation`` tags rewritten for minijinja."""
    return _GENERATION_TAG.sub(
        lambda m: "{%" + m.group(1) + (" endif " if m.group(2) else " if true ") + m.group(3) + "%}", source)


@lru_cache(maxsize=512)
def _minijinja_env(source: str, fuel: int) -> Any:
    import minijinja
    env = minijinja.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                                undefined_behavior="lenient", fuel=fuel, pycompat=True)
    env.add_filter("tojson", hf_tojson)
    env.add_filter("length", _mj_length)
    env.add_filter("count", _mj_length)
    env.add_function("raise_exception", _mj_raise)
    try:
        env.add_template("chat", _minijinja_source(source))
    except minijinja.TemplateError as e:
        raise TemplateError(f"minijinja syntax error: {e.message}", line=getattr(e, "line", None)) from None
    return env


class MiniJinjaRenderer:
    """The second engine (minijinja): same interface, fuel-limited, much faster to compile."""

    engine = "minijinja"

    def __init__(self, template: LoadedTemplate, *, limits: RenderLimits = DEFAULT_LIMITS,
                 now: Callable[[], datetime] | None = None) -> None:
        self.template = template
        self.limits = limits
        self._now = now or datetime.now

    def compile(self) -> None:
        for src in set(self.template.variants.values()):
            self._env(src)

    def _env(self, source: str) -> Any:
        try:
            return _minijinja_env(source, self.limits.fuel)
        except TemplateError as e:
            raise TemplateError(e.reason, template=self.template.name, line=e.line) from None

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str:
        import minijinja
        env = self._env(self.template.source_for(tools=tools is not None))
        now = self._now
        context = _render_context(self.template, messages, tools, documents, add_generation_prompt, kwargs)
        context.setdefault("strftime_now", lambda fmt: now().strftime(fmt))
        name = self.template.name
        token = _WATCHDOG.arm(self.limits.timeout_s)
        fired = False
        try:
            try:
                out = env.render_template("chat", **context)
            finally:
                fired = _WATCHDOG.disarm(token)
        except _RenderTimeout:
            fired = True
        except TemplateRaised as e:
            raise TemplateRaised(e.reason, template=name) from None
        except minijinja.TemplateError as e:
            kind = getattr(e, "kind", "")
            if kind == "OutOfFuel":
                raise RenderLimitError(f"out of fuel ({self.limits.fuel} instructions)", template=name,
                                       line=getattr(e, "line", None)) from None
            cause = e.__cause__
            if isinstance(cause, TemplateRaised):
                raise TemplateRaised(cause.reason, template=name, line=getattr(e, "line", None)) from None
            raise RenderError(f"minijinja {kind}: {e.message}", template=name,
                              line=getattr(e, "line", None)) from None
        except Exception as e:
            raise RenderError(f"{type(e).__name__}: {e}", template=name) from None
        finally:
            fired = _WATCHDOG.disarm(token) or fired
            if fired:
                raise RenderLimitError(f"render took over {self.limits.timeout_s:g} s", template=name)
        if len(out) > self.limits.max_output_chars:
            raise RenderLimitError(f"output over {self.limits.max_output_chars} characters", template=name)
        return out


ENGINES = ("jinja2", "minijinja")


def make_renderer(template: LoadedTemplate, engine: str = "jinja2", *,
                  limits: RenderLimits = DEFAULT_LIMITS, now: Callable[[], datetime] | None = None,
                  sandbox: str = "immutable", reuse_tools: bool = False) -> Renderer:
    """A renderer for ``template`` on ``engine`` ("jinja2", the reference, or "minijinja")."""
    if engine == "jinja2":
        return Jinja2Renderer(template, limits=limits, now=now, sandbox=sandbox, reuse_tools=reuse_tools)
    if engine == "minijinja":
        return MiniJinjaRenderer(template, limits=limits, now=now)
    raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
