"""A least-recently-used cache whose size is counted in source characters, not entries.

Compiled templates and their syntax trees are kept so that the many probe renders of one
analysis compile once. Keyed by the template text, an entry costs memory in proportion to it;
512 entries of the 4 MiB a template may have would keep gigabytes. This cache keeps at most
``max_entries`` entries and ``max_chars`` characters of source between them.

Example::

    >>> c = SourceCache(max_entries=2, max_chars=10)
    >>> c.put(("abc", 1), "A", chars=3); c.put(("defgh", 1), "D", chars=5)
    >>> c.get(("abc", 1))
    'A'
    >>> c.put(("ijklm", 1), "I", chars=5)   # over 10 characters: the least recent goes
    >>> c.get(("defgh", 1)) is None, c.get(("abc", 1))
    (True, 'A')
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class SourceCache:
    """LRU cache bounded by entries and by the total characters of the sources it keys."""

    def __init__(self, *, max_entries: int = 512, max_chars: int = 32_000_000) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        # functools' name, set per instance: tools that call every ``cache_clear`` they find in
        # a module (benchmarks/analysis_speed.py) must not find one on the class
        self.cache_clear = self._clear

    def get(self, key: Hashable) -> Any:
        """The value for ``key`` (now the most recent), or None."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: Any, *, chars: int) -> None:
        """Keep ``value`` under ``key``; older entries go while over either bound."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._chars -= old[1]
            if chars > self.max_chars:
                return  # larger than the whole cache: not kept
            self._data[key] = (value, chars)
            self._chars += chars
            while len(self._data) > self.max_entries or self._chars > self.max_chars:
                _, (_, size) = self._data.popitem(last=False)
                self._chars -= size

    def _clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()
            self._chars = 0
