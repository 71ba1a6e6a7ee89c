"""Errors of the exporters (under the project's root error)."""

from __future__ import annotations

from analyzer.errors import ChatAutoparserError


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
