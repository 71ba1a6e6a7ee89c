"""Whole analyses kept by content: in memory always, on disk when ``AUTOPARSER_CACHE`` says where.

An analysis is a pure function of the template's text and context (its variants, the chosen
one, the special tokens), the engine, the :class:`~chat_autoparser.analyzer.limits.RenderLimits` and the code
that analyses; :func:`analysis_key` hashes all of them (sha256), so a template loaded again,
from any path, finds its analysis without rendering anything. The analysis is relabelled with
the name it was loaded under.

* In memory: the last 256 analyses (and at most 64 M characters of template text), per process.
* On disk: off unless ``AUTOPARSER_CACHE`` is set: ``1`` (or ``on``) for the user cache
  (``~/.cache/chat-autoparser/analyses``), or a folder (``analyses/`` inside it);
  ``0``/``off``/empty turns it off. ``template-report`` has it on unless the variable says
  otherwise (:func:`disk_cache_setting`). Entries are JSON written by ``TemplateAnalysis.to_dict``,
  checked field by field against the dataclasses before ``from_dict`` reads them (a corrupt
  or foreign entry is ignored); the disk key adds the package version, a hash of the
  analyzer's own source and the versions of Python, jinja2 and minijinja (:func:`code_version`).
  At most 256 MB, the least recently used entries go first (:mod:`chat_autoparser.analyzer.disk_cache`).

Errors are kept too when the template alone decides them (a syntax error, an analysis that
finds no prompt), never when the machine had a say: a time limit, memory or the stack
(``ChatAutoparserError.transient``), including an analysis that had a probe time out. Nor is an
analysis of a template whose renders vary from call to call: analysing it again may differ.

Example::

    >>> from chat_autoparser.analyzer.load import from_string
    >>> from chat_autoparser.analyzer.limits import DEFAULT_LIMITS
    >>> t = from_string("{% for m in messages %}{{ m.content }}{% endfor %}")
    >>> key = analysis_key(t, engine="jinja2", limits=DEFAULT_LIMITS)
    >>> key == analysis_key(from_string(t.source, name="other"), engine="jinja2", limits=DEFAULT_LIMITS)
    True
    >>> key == analysis_key(t, engine="minijinja", limits=DEFAULT_LIMITS)
    False
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import platform
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Union

from .caching import SourceCache
from .disk_cache import DiskCache
from ..errors import AnalysisError, TemplateError
from .limits import RenderLimits
from .load import LoadedTemplate
from .structures import TemplateAnalysis, field_types

ENV_VAR = "AUTOPARSER_CACHE"
_OFF = ("", "0", "off", "false", "no")
_ON = ("1", "on", "true", "yes")
_FORMAT = "chat-autoparser/analysis/1"
_ERRORS: dict[str, type[TemplateError] | type[AnalysisError]] = {"TemplateError": TemplateError,
                                                                 "AnalysisError": AnalysisError}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one analysis gave: an analysis or the error it stopped with, and whether the
    template alone decided it (so it may be kept)."""

    result: TemplateAnalysis | TemplateError | AnalysisError
    cacheable: bool


@dataclass(frozen=True, slots=True)
class _Refusal:
    """A kept error, without the template's name."""

    kind: str
    reason: str
    line: int | None = None
    probe: str | None = None

    def error(self, name: str) -> TemplateError | AnalysisError:
        if self.kind == "TemplateError":
            return TemplateError(self.reason, template=name, line=self.line)
        return AnalysisError(self.reason, template=name, probe=self.probe)


def analysis_key(loaded: LoadedTemplate, *, engine: str, limits: RenderLimits) -> str:
    """sha256 (hex) of everything an analysis depends on but the code (see :func:`code_version`)."""
    parts = [_FORMAT, engine, dataclasses.asdict(limits), dict(sorted(loaded.variants.items())), loaded.selected,
             dict(loaded.special_tokens), loaded.tokens_are_stand_ins]
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 of the package version, the analyzer's source (and the errors'), the Python version, jinja2's version
    and minijinja's files (names, sizes, times): a disk entry written by other code is not found.
    (``importlib.metadata`` would take 30 ms a process; this takes about 2.)"""
    import importlib.util

    import jinja2

    from .. import __version__
    h = hashlib.sha256()
    h.update(f"{__version__};{platform.python_implementation()};{platform.python_version()};"
             f"jinja2={jinja2.__version__};".encode())
    spec = importlib.util.find_spec("minijinja")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for path in sorted(Path(folder).iterdir()):
            if path.is_file():
                st = path.stat()
                h.update(f"minijinja/{path.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    from .. import errors
    here = Path(__file__).parent
    for path in [*sorted(here.rglob("*.py")), Path(errors.__file__)]:  # (errors: their messages are kept)
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_MEMORY = SourceCache(max_entries=256, max_chars=64_000_000)
_DISKS: dict[str, DiskCache] = {}
_SETTING: list[str] = []  # set by disk_cache_setting: it wins over the environment


def cache_clear() -> None:
    """Forget the analyses kept in memory (the disk cache stays)."""
    _MEMORY.cache_clear()


@contextmanager
def disk_cache_setting(value: str) -> Iterator[None]:
    """Within the block, the disk cache is set by ``value`` (as ``AUTOPARSER_CACHE`` would set
    it) whatever the environment says; processes forked inside it keep the setting.

    >>> with disk_cache_setting("off"):
    ...     disk_cache() is None
    True
    """
    _SETTING.append(value)
    try:
        yield
    finally:
        _SETTING.pop()


def disk_cache() -> DiskCache | None:
    """The disk cache ``AUTOPARSER_CACHE`` (or :func:`disk_cache_setting`) names, or None when off."""
    value = (_SETTING[-1] if _SETTING else os.environ.get(ENV_VAR, "")).strip()
    if value.lower() in _OFF:
        return None
    if value.lower() in _ON:
        from .corpus import cache_root
        folder = str(cache_root() / "analyses")
    else:
        folder = os.path.abspath(Path(value).expanduser() / "analyses")
    disk = _DISKS.get(folder)
    if disk is None:
        disk = _DISKS[folder] = DiskCache(folder)
    return disk


def cached_analysis(loaded: LoadedTemplate, *, engine: str, limits: RenderLimits,
                    compute: Callable[[], Outcome]) -> TemplateAnalysis:
    """The analysis of ``loaded``: kept, or ``compute()``-d and kept when it may be; raises the
    error the analysis stopped with (a kept one, raised afresh under this template's name)."""
    key = analysis_key(loaded, engine=engine, limits=limits)
    found = _MEMORY.get(key)
    disk = disk_cache()
    disk_key = None
    if found is None and disk is not None:
        disk_key = hashlib.sha256(f"{key}:{code_version()}".encode()).hexdigest()
        found = _from_record(disk.get(disk_key), loaded, engine)
        if found is not None:
            _MEMORY.put(key, found, chars=_chars(loaded))
    if found is None:
        outcome = compute()
        found = outcome.result if isinstance(outcome.result, TemplateAnalysis) else _refusal(outcome.result)
        if outcome.cacheable:
            _MEMORY.put(key, found, chars=_chars(loaded))
            if disk is not None and disk_key is not None:
                disk.put(disk_key, _record(found))
    if isinstance(found, _Refusal):
        raise found.error(loaded.name)
    return found if found.template == loaded.name else dataclasses.replace(found, template=loaded.name)


def _chars(loaded: LoadedTemplate) -> int:
    return sum(len(v) for v in loaded.variants.values())


def _refusal(e: TemplateError | AnalysisError) -> _Refusal:
    return _Refusal(type(e).__name__, e.reason, getattr(e, "line", None), getattr(e, "probe", None))


# --------------------------------------------------------------------------- disk records

def _record(found: TemplateAnalysis | _Refusal) -> dict[str, Any]:
    if isinstance(found, _Refusal):
        return {"format": _FORMAT, "error": dataclasses.asdict(found)}
    return {"format": _FORMAT, "analysis": found.to_dict()}


def _from_record(record: dict[str, Any] | None, loaded: LoadedTemplate, engine: str
                 ) -> TemplateAnalysis | _Refusal | None:
    """The analysis or error a disk record holds, or None when it is not a valid one for this
    template (every field checked against the dataclasses first)."""
    if record is None or record.get("format") != _FORMAT:
        return None
    if "error" in record:
        err = record["error"]
        return _Refusal(**err) if _conforms(_Refusal, err) and err["kind"] in _ERRORS else None
    data = record.get("analysis")
    if not _conforms(TemplateAnalysis, data) or data["engine"] != engine:
        return None
    try:
        source = loaded.source
    except TemplateError:
        return None
    if data["sha256"] != hashlib.sha256(source.encode("utf-8")).hexdigest():
        return None
    try:
        return TemplateAnalysis.from_dict(data)
    except (TypeError, ValueError):
        return None


def _conforms(tp: Any, value: Any) -> bool:
    """Whether JSON ``value`` is exactly what ``to_dict`` writes for type ``tp``: every field of a
    dataclass present and no other, each of its type."""
    return _checker(tp)(value)


@lru_cache(maxsize=None)
def _checker(tp: Any) -> Callable[[Any], bool]:
    """A function telling whether a JSON value is of type ``tp`` (built once per type)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return lambda v: True
    if tp is type(None):
        return lambda v: v is None
    if origin in (Union, types.UnionType):
        options = [_checker(arg) for arg in typing.get_args(tp)]
        return lambda v: any(check(v) for check in options)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _checker(args[0])
            return lambda v: isinstance(v, list) and all(item(x) for x in v)
        items = [_checker(a) for a in args]
        return lambda v: isinstance(v, list) and len(v) == len(items) and all(c(x) for c, x in zip(items, v))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = frozenset(member.value for member in tp)
        return lambda v: isinstance(v, str) and v in values
    if dataclasses.is_dataclass(tp):
        hints = field_types(tp)
        checks = {f.name: hints[f.name] for f in dataclasses.fields(tp)}

        def check(v: Any) -> bool:
            return (isinstance(v, dict) and len(v) == len(checks)
                    and all(name in v and _checker(t)(v[name]) for name, t in checks.items()))
        return check
    plain = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}.get(tp)
    if plain is None:
        return lambda v: False  # a type this check does not know: not trusted
    if tp is bool:
        return lambda v: isinstance(v, bool)
    return lambda v: isinstance(v, plain) and not isinstance(v, bool)
