"""The limits every render and compile of an untrusted template runs under, and the meter
that counts against them while one runs.

A chat template is code from the internet. Each limit below closes one way such code can
take a server down; the defaults are measured on the 720-template corpus (what the corpus
needs is given beside each), with a wide margin, and every field can be changed per call
(``analyze_template(path, limits=RenderLimits(...))``, ``make_renderer(..., limits=...)``).

Example::

    >>> limits = RenderLimits(timeout_s=0.5, max_iterations=10_000)
    >>> limits.max_iterations
    10000
    >>> RenderLimits(timeout_s=0)
    Traceback (most recent call last):
    ...
    ValueError: RenderLimits.timeout_s must be positive (got 0)
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """Limits for rendering (and compiling) one untrusted template.

    Time:

    * ``timeout_s`` — wall time of one render (a watchdog interrupts it).
    * ``analysis_timeout_s`` — wall time of a whole ``analyze_template`` (compiles and every
      probe render); past it the analysis stops with a ``RenderLimitError`` naming the probe.
      The slowest corpus template takes 0.1-0.2 s.
    * ``compile_timeout_s`` — wall time of parsing and generating code for one template (the
      corpus' largest takes about 60 ms).

    Work, counted and refused before the work is done:

    * ``max_iterations`` — ``{% for %}`` iterations in one jinja2 render (its fuel; a loop is
      charged its length when it starts). Corpus probes need at most 143 (about 30 a message);
      at the limit loops have run for 25 ms (empty) to 250 ms (recursive). Raise it for
      conversations of more than about 1,500 messages.
    * ``fuel`` — minijinja's instruction budget for one render (probes need 100-3,000).
    * ``max_output_chars`` — characters one render may produce.
    * ``max_value_size`` — characters (or items) one operation may build: ``*``, ``+``, ``~``,
      ``%``, ``str.format`` and its widths, ``center``, ``indent``, ``join``, ``replace``,
      ``wordwrap`` (its work too), ``tojson`` (``indent`` and ``separators`` included),
      ``sum``, ``batch``, ``slice``, ``lipsum`` and the string methods that pad or repeat.
    * ``max_value_nodes`` / ``max_value_depth`` — containers and items (counted as a tree: a
      list that holds one list twice counts it twice) and nesting of one value that is
      printed, serialised, compared or hashed. A list holding itself 64 levels deep is tiny
      in memory and 2**64 items long when printed; C code does that printing and no timer can
      stop it, so it is measured first. Corpus probes print or serialise values of at most
      229 nodes, 8 levels, 2.6 KB.
    * ``max_int_bits`` — size of an ``**`` result.

    Compiling:

    * ``max_compiled_chars`` — Python code jinja2 generates for one template, its text not
      counted (the corpus' largest: 78 KB). Python's own compiler, which no timer can
      interrupt, runs after this check and takes about 0.4 s a megabyte. A template with
      more than one tag per 50 of these characters is refused before it is parsed.
    * ``max_nesting`` — nested blocks (``for``, ``if``, ``macro``, ...); the corpus nests 12
      deep at most. Python refuses more than 20 nested loops in one function anyway.

    Process (minijinja runs in a separate worker process, see ``analyzer.minijinja_engine``):

    * ``worker_memory_mb`` — memory the worker may allocate beyond its start-up size; past
      it an allocation fails, the worker dies alone and the render gets a ``RenderLimitError``.
    """

    timeout_s: float = 2.0
    max_output_chars: int = 2_000_000
    fuel: int = 2_000_000
    max_iterations: int = 50_000
    max_value_size: int = 2_000_000
    max_value_nodes: int = 100_000
    max_value_depth: int = 100
    max_int_bits: int = 4096
    compile_timeout_s: float = 2.0
    max_compiled_chars: int = 1_000_000
    max_nesting: int = 20
    analysis_timeout_s: float = 5.0
    worker_memory_mb: int = 192

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"RenderLimits.{f.name} must be positive (got {value!r})")


DEFAULT_LIMITS = RenderLimits()


def render_timeout(limits: RenderLimits, deadline: float | None) -> float:
    """The time one render may take: its own limit, or less when the ``time.monotonic()``
    ``deadline`` of the analysis it belongs to comes first.

    >>> render_timeout(RenderLimits(timeout_s=2.0), None)
    2.0
    """
    if deadline is None:
        return limits.timeout_s
    return max(min(limits.timeout_s, deadline - time.monotonic()), 0.001)


class Meter:
    """What the running render (or compile) has spent; one per render, in its thread.

    ``known`` maps ``id()`` of containers whose measure is known already (the caller's tools,
    converted once and never changed in the immutable sandbox) to that measure; ``texts`` keeps
    the JSON text of those containers once written (:func:`chat_autoparser.analyzer.bounded.tojson`)."""

    __slots__ = ("limits", "iterations", "known", "texts")

    def __init__(self, limits: RenderLimits, known: dict[int, tuple[int, int, int]] | None = None,
                 texts: dict[tuple, str] | None = None) -> None:
        self.limits = limits
        self.iterations = 0
        self.known = known
        self.texts = texts


class _Running(threading.local):
    """``running.meter``: the meter of the render running in this thread (hot paths read it
    directly; :func:`current` is the same)."""

    meter = Meter(DEFAULT_LIMITS)  # outside any render: the defaults (a class attribute: no lookup miss)


running = _Running()


def current() -> Meter:
    """The meter of the render running in this thread (the defaults outside any render).

    >>> current().limits == DEFAULT_LIMITS
    True
    """
    return running.meter


class metered:
    """Context manager: run a render or compile in this thread against fresh counters.

    >>> with metered(RenderLimits(max_iterations=5)) as m:
    ...     current().limits.max_iterations
    5
    """

    __slots__ = ("meter", "_outer")

    def __init__(self, limits: RenderLimits, known: dict[int, tuple[int, int, int]] | None = None,
                 texts: dict[tuple, str] | None = None) -> None:
        self.meter = Meter(limits, known, texts)

    def __enter__(self) -> Meter:
        self._outer = running.meter
        running.meter = self.meter
        return self.meter

    def __exit__(self, *exc: object) -> None:
        running.meter = self._outer
