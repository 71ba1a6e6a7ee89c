"""A watchdog thread that interrupts a render (or compile) running past its deadline.

The interrupt is an asynchronous exception (:class:`Interrupted`) delivered at the next Python
bytecode of the watched thread: jinja2 templates compile to Python, so their loops stop; a
single C call (which the guards in :mod:`chat_autoparser.analyzer.guards` keep small) finishes first.

Example::

    >>> token = WATCHDOG.arm(5.0)
    >>> WATCHDOG.disarm(token)  # in time: False
    False
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")


class Interrupted(BaseException):
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
        # entered directly (a C call): an interrupt that arrives while a thread waits for it is
        # raised inside ``with``, never between taking the lock and the block (Condition's
        # __enter__ is Python code, and an interrupt there would leave the lock held)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, int] = {}  # token -> thread id
        self._fired: dict[int, float] = {}  # token -> wait before the interrupt is sent again
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="render-watchdog", daemon=True)
            self._thread.start()

    def arm(self, timeout_s: float) -> int:
        token = next(self._tokens)
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._ensure_thread()
            self._armed[token] = threading.get_ident()
            # The thread sleeps until the earliest deadline in the heap (or for good when it is
            # empty); it wakes then and finds this one. Waking it for every render would hand it
            # the GIL once a render.
            wake = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, token))
            if wake:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching ``token``; True when it had fired (any pending interrupt is cleared)."""
        with self._lock:
            tid = self._armed.pop(token, None)
            fired = self._fired.pop(token, None) is not None
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
                if tid is not None:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid),
                                                               ctypes.py_object(Interrupted))
                    # An interrupt can be swallowed: raised inside a gc callback or a __del__,
                    # where Python ignores exceptions. Allocating code runs gc callbacks often
                    # (hypothesis installs one), so this is sent again until the thread
                    # disarms: soon at first, then less often (a thread inside one long C call
                    # takes it only when the call returns).
                    wait = self._fired[token] = min(self._fired.get(token, REFIRE_FIRST_S / 2) * 2, REFIRE_MAX_S)
                    heapq.heappush(self._heap, (time.monotonic() + wait, token))


REFIRE_FIRST_S = 0.01  # how long an interrupt has to be taken before it is sent again,
REFIRE_MAX_S = 0.25  # doubling each time up to this


WATCHDOG = _Watchdog()


class TimedOut(Exception):
    """Raised by :func:`run_with_deadline` when the call ran past its time."""


def run_with_deadline(fn: Callable[[], T], timeout_s: float) -> T:
    """``fn()``, interrupted once ``timeout_s`` has passed (then :class:`TimedOut` replaces
    whatever the interrupted call was doing or raising).

    >>> run_with_deadline(lambda: 42, 1.0)
    42
    >>> def spin():
    ...     while True:
    ...         pass
    >>> run_with_deadline(spin, 0.05)
    Traceback (most recent call last):
    ...
    chat_autoparser.analyzer.watchdog.TimedOut
    """
    token = WATCHDOG.arm(timeout_s)
    fired = False
    try:
        return fn()
    except Interrupted:
        fired = True
    finally:
        while True:  # (an interrupt sent again may arrive inside disarm: it is taken here)
            try:
                fired = WATCHDOG.disarm(token) or fired
                break
            except Interrupted:
                fired = True
        if fired:
            raise TimedOut  # noqa: B012 - the time limit wins over what the call was doing
    raise AssertionError("unreachable")  # pragma: no cover
