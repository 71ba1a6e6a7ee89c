"""Render chat templates exactly as Hugging Face transformers does, under limits.

Two engines share one interface (:class:`Renderer`):

* ``jinja2`` — the reference. Environment, globals, ``tojson`` and input preprocessing
  follow transformers 5.x ``apply_chat_template(..., tokenize=False)``: immutable sandbox,
  ``trim_blocks``/``lstrip_blocks``, loop controls, the ``{% generation %}`` tag,
  ``raise_exception``, ``strftime_now``, HF's ``tojson`` (no HTML escaping, keys unsorted,
  ``ensure_ascii=False``), ``None``-valued message keys dropped, inputs rebuilt from plain
  JSON types, reasoning aliased across ``reasoning_content``/``thinking``/``reasoning``
  (:mod:`chat_autoparser.analyzer.context`).
* ``minijinja`` — a second engine, ~100x faster to compile, with an instruction budget
  (fuel), run in a worker process (:mod:`chat_autoparser.analyzer.minijinja_engine`). It departs from HF in a
  few filters; use it as a cross-check or a fallback.

Templates are untrusted code. Every render and compile runs under :class:`RenderLimits`: a
wall-time limit (a watchdog interrupts the thread), a loop budget, an output-size limit, and
guarded operations (:mod:`chat_autoparser.analyzer.guards`) that size every allocation and measure every value
C code would walk before it happens; nothing is evaluated while compiling
(:mod:`chat_autoparser.analyzer.codegen`). Going over a limit raises :class:`RenderLimitError`.

Example::

    >>> from chat_autoparser.analyzer.load import from_string
    >>> r = make_renderer(from_string("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"))
    >>> r.render([{"role": "user", "content": "hi"}])
    '[user]hi'
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Protocol, Sequence

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
from jinja2.exceptions import TemplateSyntaxError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
from jinja2.utils import internal_code

from . import guards
from .bounded import tree_measures
from .caching import SourceCache
from .codegen import GuardedCodeGenerator
from .context import (REASONING_FIELDS, hf_tojson, plain_data, prepare_messages, render_context,  # noqa: F401
                      template_special_tokens)
from ..errors import RenderError, RenderLimitError, SecurityError, TemplateError, TemplateRaised
from .limits import DEFAULT_LIMITS, RenderLimits, metered, render_timeout
from .load import LoadedTemplate
from .minijinja_engine import MiniJinjaRenderer, minijinja_compile_error
from .watchdog import TimedOut, run_with_deadline

__all__ = ["ENGINES", "DEFAULT_LIMITS", "RenderLimits", "Renderer", "Jinja2Renderer", "MiniJinjaRenderer",
           "make_renderer", "compile_template", "compile_error", "parse_template", "hf_tojson", "plain_data",
           "prepare_messages", "template_special_tokens", "REASONING_FIELDS"]


class Renderer(Protocol):
    engine: str
    template: LoadedTemplate
    # A monotonic time no render may run past (the analysis' budget), or None.
    deadline: float | None

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str: ...


# --------------------------------------------------------------------------- jinja2 environment

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
    """transformers' ``dict`` global: callable, with ``fromkeys``, nothing else reachable.
    Keys are hashed: arguments are measured first (:func:`chat_autoparser.analyzer.guards.checked_arguments`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        guards.checked_arguments(args, kwargs)
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        guards.checked_arguments(args, kwargs)
        return dict.fromkeys(*args, **kwargs)


# jinja2 names an object's type by its module and class in its messages ("'… object' has no
# attribute …"): this one is named as transformers names its own, so the messages are its.
_TemplateDict.__module__ = "transformers.utils.chat_template_utils"
_TemplateDict.__name__ = _TemplateDict.__qualname__ = "TemplateDict"


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
            raise jinja2.exceptions.SecurityError(f"Chat templates cannot store underscore-prefixed attributes on a "
                                f"namespace, but got {name!r}. Please rename the attribute.")



class _PlainGlobals:
    """A template's globals as one plain dict. jinja2's ``ChainMap`` over the environment's
    globals is copied key by key into every render's context, a fifth of the time a short
    render takes; these environments' globals are all set before any template compiles."""

    globals: dict[str, Any]

    def make_globals(self, d: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**self.globals, **(d or {})}


class _HFEnvironment(_PlainGlobals, guards.GuardedOps, ImmutableSandboxedEnvironment):
    code_generator_class = GuardedCodeGenerator


class _RelaxedEnvironment(_PlainGlobals, guards.GuardedOps, SandboxedEnvironment):
    """Mutable sandbox: lets ``list.append`` through. Used only as a recorded fallback for
    templates that transformers' own sandbox cannot render."""

    code_generator_class = GuardedCodeGenerator


def _environment(sandbox: str) -> SandboxedEnvironment:
    cls = _HFEnvironment if sandbox == "immutable" else _RelaxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    # The optimizer folds constants, running template code at compile time; it changes no
    # output and is off (the code generator folds nothing either, see analyzer.codegen).
    env.optimized = False
    env.globals["raise_exception"] = _raise_exception
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    guards.install(env)  # tojson (HF's, measured), guarded filters and code-generator hooks
    return env


_ENVIRONMENTS = {"immutable": _environment("immutable"), "relaxed": _environment("relaxed")}
_ASTS = SourceCache()
_COMPILED = SourceCache()


def parse_template(source: str) -> jinja2.nodes.Template:
    """The jinja2 AST of ``source`` (cached; raises TemplateSyntaxError)."""
    ast = _ASTS.get(source)
    if ast is None:
        ast = _ENVIRONMENTS["immutable"].parse(source)
        _ASTS.put(source, ast, chars=len(source))
    return ast


def _compile_error(e: BaseException, limits: RenderLimits) -> TemplateError:
    """What went wrong while compiling, as a TemplateError without the template's name."""
    if isinstance(e, TemplateError):
        return e
    if isinstance(e, TemplateSyntaxError):
        return TemplateError(f"Jinja syntax error: {e.message}", line=e.lineno)
    if isinstance(e, TimedOut):
        return TemplateError(f"compiling took over {limits.compile_timeout_s:g} s (compile_timeout_s)",
                             transient=True)
    if isinstance(e, RecursionError):  # the parser's or code generator's recursion (the stack's depth)
        return TemplateError("template nests too deeply to compile", transient=True)
    if isinstance(e, SyntaxError):  # Python's own limits on the generated code
        return TemplateError(f"template nests too deeply to compile ({e.msg})")
    if isinstance(e, MemoryError):
        return TemplateError("out of memory while compiling", transient=True)
    return TemplateError(f"cannot compile: {type(e).__name__}: {e}")


def compile_template(source: str, sandbox: str = "immutable", limits: RenderLimits = DEFAULT_LIMITS
                     ) -> jinja2.Template:
    """``source`` compiled for ``sandbox`` ("immutable" or "relaxed") under ``limits``: cached,
    within ``compile_timeout_s``, ``max_compiled_chars`` and ``max_nesting``; raises
    TemplateError (without the template's name) for anything that does not compile.

    >>> compile_template("{% for x in y %}" * 40 + "{% endfor %}" * 40)
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.TemplateError: <template>:1: blocks nest over 20 deep (max_nesting)
    """
    key = (source, sandbox, limits.max_compiled_chars, limits.max_nesting)
    compiled = _COMPILED.get(key)
    if compiled is not None:
        return compiled
    # Every tag compiles to 100 characters or more: past one tag per 50, it is refused unparsed
    # (a source shorter than twice that many characters cannot have that many tags)
    tags = source.count("{{") + source.count("{%") if len(source) > limits.max_compiled_chars // 25 else 0
    if tags > limits.max_compiled_chars // 50:
        raise TemplateError(f"template has {tags} tags: it would compile to over {limits.max_compiled_chars} "
                            "characters of Python (max_compiled_chars)")

    def build() -> jinja2.Template:
        with metered(limits):
            return _ENVIRONMENTS[sandbox].from_string(parse_template(source))

    try:
        compiled = run_with_deadline(build, limits.compile_timeout_s)
    except Exception as e:  # parsing and code generation can raise anything on hostile input
        raise _compile_error(e, limits) from None
    _COMPILED.put(key, compiled, chars=len(source))
    return compiled


def _template_line(tb: Any) -> int | None:
    """The template line of the innermost template frame in a traceback: the generated code's
    line, mapped back through the template's debug info (as jinja2 rewrites tracebacks: its
    internal functions, such as the stand-in for a filter no one defined, are not the template's)."""
    line = None
    while tb is not None:
        frame = tb.tb_frame
        template = frame.f_globals.get("__jinja_template__")
        if template is not None and frame.f_code not in internal_code:
            line = template.get_corresponding_lineno(tb.tb_lineno)
        tb = tb.tb_next
    return line


def compile_error(source: str, name: str, engine: str = "jinja2", limits: RenderLimits = DEFAULT_LIMITS
                  ) -> TemplateError | None:
    """The compile error of ``source`` under ``engine`` as a TemplateError naming ``name``, or None."""
    if engine != "jinja2":
        return minijinja_compile_error(source, name, limits)
    try:
        compile_template(source, "immutable", limits)
    except TemplateError as e:
        return TemplateError(e.reason, template=name, line=e.line, transient=e.transient)
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
        self.deadline: float | None = None
        # reuse_tools: the caller passes the same, never-mutated tools list many times (probing)
        self.reuse_tools = reuse_tools
        # id(tools) -> (tools, plain copy, measures of its containers), for the few lists reused
        self._tools: dict[int, tuple[Any, list[Any], dict[int, tuple[int, int, int]], dict[tuple, str]]] = {}
        self._by_source: dict[str, jinja2.Template] = {}  # this template's variants, compiled
        self._now = now or datetime.now
        if sandbox == "relaxed":
            self.engine = "jinja2-relaxed"

    def _compiled(self, source: str) -> jinja2.Template:
        compiled = self._by_source.get(source)
        if compiled is None:
            try:
                compiled = compile_template(source, self.sandbox, self.limits)
            except TemplateError as e:
                raise TemplateError(e.reason, template=self.template.name, line=e.line,
                                    transient=e.transient) from None
            self._by_source[source] = compiled
        return compiled

    def compile(self) -> None:
        """Compile every variant now, so syntax errors surface as TemplateError."""
        for src in set(self.template.variants.values()):
            self._compiled(src)

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str:
        compiled = self._compiled(self.template.source_for(tools=tools is not None))
        plain_tools = known = texts = None
        if self.reuse_tools and tools is not None and self.sandbox == "immutable":
            # the immutable sandbox cannot change the converted list, so it (and its measures,
            # which spare the guards walking it again, and its parts' JSON texts) can serve again
            hit = self._tools.get(id(tools))
            if hit is None or hit[0] is not tools:
                if len(self._tools) >= 8:
                    self._tools.clear()
                plain = plain_data(list(tools))
                hit = self._tools[id(tools)] = (tools, plain, tree_measures(plain), {})
            plain_tools, known, texts = hit[1], hit[2], hit[3]
        context = render_context(self.template, messages, tools, documents, add_generation_prompt, kwargs,
                                 plain_tools)
        now = self._now
        context.setdefault("strftime_now", lambda fmt: now().strftime(fmt))
        return self._run(compiled, context, known, texts)

    def _run(self, compiled: jinja2.Template, context: dict[str, Any],
             known: dict[int, tuple[int, int, int]] | None = None, texts: dict[tuple, str] | None = None) -> str:
        name = self.template.name
        limit = self.limits.max_output_chars
        timeout = render_timeout(self.limits, self.deadline)

        def generate() -> str:
            pieces: list[str] = []
            size = 0
            # the root render function itself, not Template.generate: that one rewrites every
            # exception's traceback into template frames (compiling code for each), and most
            # templates refuse a few probes by raising
            for piece in compiled.root_render_func(compiled.new_context(context)):
                size += len(piece)
                if size > limit:
                    raise RenderLimitError(f"output over {limit} characters", template=name)
                pieces.append(piece)
            return "".join(pieces)

        try:
            with metered(self.limits, known, texts):
                return run_with_deadline(generate, timeout)
        except TimedOut:
            raise RenderLimitError(f"render took over {timeout:g} s", template=name, transient=True) from None
        except RenderLimitError as e:
            raise RenderLimitError(e.reason, template=name, line=_template_line(e.__traceback__),
                                   transient=e.transient) from None
        except TemplateRaised as e:
            raise TemplateRaised(e.reason, template=name, line=_template_line(e.__traceback__)) from None
        except RecursionError:
            raise RenderLimitError("recursion too deep", template=name, transient=True) from None
        except MemoryError:
            raise RenderLimitError("out of memory", template=name, transient=True) from None
        except jinja2.exceptions.SecurityError as e:
            raise SecurityError(f"sandbox refused: {e}", template=name,
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
