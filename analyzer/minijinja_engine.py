"""The minijinja engine: the same interface as the jinja2 renderer, rendered in worker processes.

minijinja cannot be bounded from inside the process (see :mod:`chat_autoparser.analyzer.minijinja_worker`), so
every render is a request to a worker process that has a memory cap and is killed past the
time limit. A worker that dies takes only the render with it: the caller gets a
:class:`RenderLimitError` and the next render starts a fresh worker. Workers are pooled (one
per thread rendering at the same time) and keep the templates they compiled.

Example::

    >>> from chat_autoparser.analyzer.load import from_string
    >>> MiniJinjaRenderer(from_string("{{ messages[0].content|upper }}")).render([{"role": "user", "content": "hi"}])
    'HI'
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import marshal
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .context import render_context
from ..errors import RenderError, RenderLimitError, SecurityError, TemplateError, TemplateRaised
from .limits import DEFAULT_LIMITS, RenderLimits, render_timeout
from .load import LoadedTemplate

_WORKER_SCRIPT = Path(__file__).with_name("minijinja_worker.py")
_MAX_REPLY = 1 << 30
# A worker's start (Python, minijinja) is not part of any render's time; on a loaded machine
# it can take a second or more.
_START_TIMEOUT_S = 60.0


class _WorkerGone(Exception):
    """The worker ran past its time (it has been killed) or died."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _signal_name(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class _Worker:
    """One worker process and the templates it has been sent."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self.known: set[bytes] = set()
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", str(_WORKER_SCRIPT), str(memory_mb)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, close_fds=True, bufsize=0)
        except OSError as e:
            raise RenderError(f"cannot start the minijinja worker: {e}") from None
        try:
            self._read(4, time.monotonic() + _START_TIMEOUT_S)  # its "ready"
        except (_WorkerGone, EOFError, OSError):
            self.kill()
            raise RenderError("the minijinja worker did not start (is minijinja installed?)") from None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def call(self, request: tuple, timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply; :class:`_WorkerGone` when the worker runs
        late (it is killed) or dies."""
        deadline = time.monotonic() + timeout_s
        data = marshal.dumps(request)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(struct.pack("<I", len(data)) + data)
            header = self._read(4, deadline)
            (size,) = struct.unpack("<I", header)
            if size > _MAX_REPLY:
                self.kill()
                raise _WorkerGone("the minijinja worker sent a malformed reply")
            return json.loads(self._read(size, deadline))
        except (BrokenPipeError, EOFError, OSError, ValueError):
            self.kill()
            raise _WorkerGone(f"the minijinja worker died ({_signal_name(self.proc.returncode)}); a render "
                              f"that allocates past worker_memory_mb={self.memory_mb} ends this way") from None

    def _read(self, n: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        data = b""
        while len(data) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                self.kill()
                raise _WorkerGone("late")
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data


class _Pool:
    """Idle workers by memory cap; a thread takes one for a render and gives it back."""

    def __init__(self, max_idle: int = 4) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    def acquire(self, memory_mb: int) -> _Worker:
        with self._lock:
            for i, w in enumerate(self._idle):
                if w.memory_mb == memory_mb:
                    del self._idle[i]
                    if w.alive():
                        return w
                    w.kill()
                    break
        return _Worker(memory_mb)

    def release(self, worker: _Worker) -> None:
        if not worker.alive():
            worker.kill()
            return
        with self._lock:
            self._idle.append(worker)
            extra = self._idle[:-self._max_idle] if len(self._idle) > self._max_idle else []
            del self._idle[:len(extra)]
        for w in extra:
            w.kill()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def _key(source: str) -> bytes:
    return hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _request(op: str, source: str, key: bytes, rest: tuple, limits: RenderLimits, timeout_s: float
             ) -> dict[str, Any]:
    """One request to a pooled worker, sending the source only to a worker that lacks it."""
    worker = _POOL.acquire(limits.worker_memory_mb)
    done = False
    try:
        reply = worker.call((op, key, None if key in worker.known else source) + rest, timeout_s)
        if reply.get("need_source"):
            reply = worker.call((op, key, source) + rest, timeout_s)
        worker.known.add(key)
        done = True
        return reply
    finally:
        if done:
            _POOL.release(worker)
        else:  # interrupted mid-request: a reply may still be on its way; never reuse it
            worker.kill()


def minijinja_compile_error(source: str, name: str, limits: RenderLimits = DEFAULT_LIMITS) -> TemplateError | None:
    """minijinja's syntax error for ``source`` as a TemplateError naming ``name``, or None."""
    try:
        reply = _request("compile", source, _key(source), (limits.fuel,), limits, limits.compile_timeout_s)
    except _WorkerGone as e:
        reason = (f"compiling took over {limits.compile_timeout_s:g} s (compile_timeout_s)" if e.reason == "late"
                  else e.reason)
        return TemplateError(reason, template=name, transient=True)
    if "error" in reply:
        return TemplateError(reply["message"], template=name, line=reply["line"])
    return None


class MiniJinjaRenderer:
    """The second engine (minijinja): same interface, fuel-limited, rendered in a worker process."""

    engine = "minijinja"

    def __init__(self, template: LoadedTemplate, *, limits: RenderLimits = DEFAULT_LIMITS,
                 now: Callable[[], datetime] | None = None) -> None:
        self.template = template
        self.limits = limits
        self.deadline: float | None = None
        self._now = now or datetime.now
        self._keys: dict[str, bytes] = {}
        self._limits = dataclasses.asdict(limits)

    def _key(self, source: str) -> bytes:
        key = self._keys.get(source)
        if key is None:
            key = self._keys[source] = _key(source)
        return key

    def compile(self) -> None:
        for src in set(self.template.variants.values()):
            err = minijinja_compile_error(src, self.template.name, self.limits)
            if err is not None:
                raise err

    def render(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               **kwargs: Any) -> str:
        source = self.template.source_for(tools=tools is not None)
        context = render_context(self.template, messages, tools, documents, add_generation_prompt, kwargs)
        now = self._now()
        stamp = (now.year, now.month, now.day, now.hour, now.minute, now.second, now.microsecond)
        name = self.template.name
        timeout = render_timeout(self.limits, self.deadline)
        try:
            reply = _request("render", source, self._key(source), (self._limits, stamp, context), self.limits,
                             timeout)
        except _WorkerGone as e:
            reason = f"render took over {timeout:g} s" if e.reason == "late" else e.reason
            raise RenderLimitError(reason, template=name, transient=True) from None
        except ValueError as e:  # marshal: a value plain_data let through that marshal cannot carry
            raise RenderError(f"cannot pass the input to minijinja: {e}", template=name) from None
        if "ok" in reply:
            return reply["ok"]
        kind, message, line = reply["error"], reply["message"], reply["line"]
        if kind == "syntax":
            raise TemplateError(message, template=name, line=line)
        if kind == "fuel":
            raise RenderLimitError(f"out of fuel ({self.limits.fuel} instructions)", template=name, line=line)
        if kind == "resource":  # memory or the stack ran out: the machine's limit, not the input's
            raise RenderLimitError(message, template=name, line=line, transient=True)
        error = {"raised": TemplateRaised, "limit": RenderLimitError, "security": SecurityError}.get(kind, RenderError)
        raise error(message, template=name, line=line)
