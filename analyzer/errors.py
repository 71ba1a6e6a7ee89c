"""Typed errors. Each says which template, which probe and, where known, which position.

The hierarchy lets callers catch broadly (``ChatAutoparserError``) or precisely
(``TemplateRaised`` when a template refuses a probe with ``raise_exception``).
"""

from __future__ import annotations


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
    :class:`analyzer.limits.RenderLimits`. Also raised by ``analyze_template`` when the whole
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
