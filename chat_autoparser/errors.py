"""Every error chat-autoparser raises on purpose, in one tree under :class:`ChatAutoparserError`.

Each says which template, which probe and, where known, which position. Callers catch broadly
(``ChatAutoparserError``) or precisely (``TemplateRaised`` when a template refuses a probe with
``raise_exception``)::

    ChatAutoparserError
    ├── TemplateError            the template cannot be loaded or compiled
    ├── RenderError              a render failed
    │   ├── TemplateRaised       the template refused the input (raise_exception)
    │   ├── RenderLimitError     a render went over a limit
    │   └── SecurityError        the sandbox refused an operation
    ├── AnalysisError            the renders make no sense to the analysis
    ├── ParseError               model output off its format (strict=True)
    ├── ExportError              an export cannot be made
    │   └── NotExpressible       the format cannot say what the template does
    ├── GrammarError             a grammar our GBNF check refuses
    ├── EngineError              a grammar engine refused a grammar
    ├── TokenizerError           a tokenizer that cannot be loaded or used
    ├── ConversationError        a template or message the roundtrip tools cannot use
    ├── RoundtripInputError      bad arguments to check_roundtrip
    ├── CorpusError              the template corpus is missing or does not match its manifest
    ├── FetchError               a corpus package could not be downloaded or used
    └── InputError               a command-line input that cannot be used (exit 2)

This module imports nothing of the package: every layer imports it.
"""

from __future__ import annotations

from typing import Any, Sequence


class ChatAutoparserError(Exception):
    """Base of every error this project raises on purpose.

    ``transient`` is true for an error that depends on the machine, not only on the input: a
    time limit, memory or the stack running out. The same input may succeed next time, so such
    an error (or an analysis that met one) is never cached.
    """

    transient: bool = False


class TemplateError(ChatAutoparserError):
    """The template could not be loaded or compiled (missing file, bad JSON, syntax error)."""

    def __init__(self, message: str, *, template: str | None = None, line: int | None = None,
                 transient: bool = False):
        self.template = template
        self.line = line
        self.transient = transient
        where = template or "<template>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")
        self.reason = message


class RenderError(ChatAutoparserError):
    """Rendering failed at run time."""

    def __init__(self, message: str, *, template: str | None = None, probe: str | None = None,
                 line: int | None = None, transient: bool = False):
        self.template = template
        self.probe = probe
        self.line = line
        self.reason = message
        self.transient = transient
        parts = [template or "<template>"]
        if line is not None:
            parts[0] += f":{line}"
        if probe:
            parts.append(f"probe {probe!r}")
        super().__init__(f"{', '.join(parts)}: {message}")

    def with_probe(self, probe: str) -> "RenderError":
        """The same error, naming the probe that triggered it."""
        err = type(self).__new__(type(self))
        RenderError.__init__(err, self.reason, template=self.template, probe=probe, line=self.line,
                             transient=self.transient)
        return err


class TemplateRaised(RenderError):
    """The template itself called ``raise_exception(...)``: it refuses this input."""


class RenderLimitError(RenderError):
    """A render went over a limit (time, output size, recursion, fuel, a value's size); see
    :class:`chat_autoparser.analyzer.limits.RenderLimits`. Also raised by ``analyze_template`` when the whole
    analysis runs over its time budget, naming the probe it stopped at."""


class SecurityError(RenderError):
    """The template tried something the sandbox forbids: an unsafe attribute, changing a
    value (``list.append`` in transformers' immutable sandbox), or a method of an input value
    that the minijinja engine does not expose."""


class AnalysisError(ChatAutoparserError):
    """The template rendered, but the analysis could not make sense of it."""

    def __init__(self, message: str, *, template: str | None = None, probe: str | None = None):
        self.template = template
        self.probe = probe
        self.reason = message
        where = template or "<template>"
        if probe:
            where += f", probe {probe!r}"
        super().__init__(f"{where}: {message}")


class ParseError(ChatAutoparserError):
    """Model output did not match the expected format (raised only when ``strict=True``)."""

    def __init__(self, message: str, *, position: int | None = None, text: str | None = None):
        self.position = position
        self.reason = message
        loc = f" at position {position}" if position is not None else ""
        context = ""
        if text is not None and position is not None:
            context = f" near {text[max(0, position - 20):position + 20]!r}"
        super().__init__(f"{message}{loc}{context}")


class ExportError(ChatAutoparserError):
    """An export could not be made: an unknown format, or bad options. Names the template and
    the format."""

    def __init__(self, message: str, *, template: str | None = None, fmt: str | None = None) -> None:
        self.template, self.fmt, self.reason = template, fmt, message
        where = ", ".join(x for x in (template or "<template>", f"export {fmt!r}" if fmt else "") if x)
        super().__init__(f"{where}: {message}")


class NotExpressible(ExportError):
    """The format cannot say what this template does; ``reason`` says why, ``evidence`` (when
    there is one) shows it: for Edge-LLM, the conversation whose flattening differs."""

    def __init__(self, message: str, *, template: str | None = None, fmt: str | None = None,
                 evidence: dict | None = None) -> None:
        super().__init__(message, template=template, fmt=fmt)
        self.evidence = evidence or {}


class GrammarError(ChatAutoparserError):
    """A grammar failed ``assert_valid_gbnf``; ``issues`` holds every problem found."""

    def __init__(self, issues: Sequence[Any]) -> None:  # generator.verify.gbnf_check.GbnfIssue
        self.issues = list(issues)
        lines = "\n".join(f"  {issue}" for issue in self.issues)
        super().__init__(f"invalid GBNF grammar ({len(self.issues)} issue(s)):\n{lines}")


class EngineError(ChatAutoparserError):
    """An engine refused a grammar (or could not be set up); the message names the engine."""

    def __init__(self, engine: str, message: str) -> None:
        self.engine, self.message = engine, message
        super().__init__(f"{engine}: {message.strip()}")

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:  # crosses process boundaries whole
        return EngineError, (self.engine, self.message)


class TokenizerError(ChatAutoparserError):
    """A tokenizer that cannot be loaded or used (missing file, unknown kind, missing package)."""


class ConversationError(ChatAutoparserError):
    """A template or message the roundtrip tools cannot use (no template source to render, an
    assistant message where only new input may go)."""


class RoundtripInputError(ChatAutoparserError):
    """Bad arguments to :func:`check_roundtrip` (an unknown scenario name, an unusable template)."""


class CorpusError(ChatAutoparserError):
    """The template corpus is missing, incomplete, or does not match its manifest."""


class FetchError(ChatAutoparserError):
    """A package could not be downloaded or used (network, sha256 mismatch, unreadable archive)."""


class InputError(ChatAutoparserError):
    """A command-line input that cannot be used: a missing or unreadable file, no templates, an
    unreadable baseline (the command-line tools exit 2)."""
