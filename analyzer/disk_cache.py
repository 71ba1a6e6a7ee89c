"""A folder of JSON entries named by key: written atomically, read defensively, bounded in size.

What the analysis cache keeps on disk (:mod:`chat_autoparser.analyzer.analysis_cache`). An entry is one JSON
object that names its own key; reading returns it only when it parses and carries that key,
so a truncated, corrupt or foreign file is ignored (and later overwritten), never trusted.
Nothing is unpickled or executed. Each write goes to a temporary file in the same folder and is
renamed into place, so readers see the old entry or the new one, never a part. When the folder
grows past ``max_bytes``, the least recently used entries go (reads refresh an entry's time).

Example::

    >>> import tempfile
    >>> cache = DiskCache(tempfile.mkdtemp(), max_bytes=10_000)
    >>> cache.put("ab" * 32, {"answer": 42})
    >>> cache.get("ab" * 32)
    {'answer': 42}
    >>> cache.get("cd" * 32) is None
    True
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# one entry is an analysis of a few kilobytes; a bigger file is not one of ours
MAX_ENTRY_BYTES = 4_000_000
_SUFFIX = ".json"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0  # a temporary file this old was left by a writer that died


def _valid_key(key: str) -> bool:
    return 16 <= len(key) <= 128 and all(c in "0123456789abcdef" for c in key)


class DiskCache:
    """JSON entries in ``folder``, at most about ``max_bytes`` in all."""

    def __init__(self, folder: str | os.PathLike[str], *, max_bytes: int = 256_000_000) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self._size: int | None = None  # bytes in the folder, counted at the first write
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        if not _valid_key(key):
            raise ValueError(f"cache keys are lowercase hex digests, not {key!r}")
        return self.folder / f"{key}{_SUFFIX}"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or None (absent, unreadable, corrupt or foreign)."""
        path = self._path(key)
        try:
            # no symlink followed, no wait on a FIFO: only a regular file is read
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                raw = f.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("value"), dict):
            return None
        try:
            os.utime(path)  # recently used: pruned last
        except OSError:
            pass
        return entry["value"]

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` (atomically); a folder that cannot be written is skipped
        silently, as a cache may be."""
        path = self._path(key)
        data = json.dumps({"key": key, "value": value}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(data) > MAX_ENTRY_BYTES:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_SUFFIX, dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            return
        self._grew(len(data))

    def _grew(self, added: int) -> None:
        with self._lock:
            if self._size is None:
                self._size = self._scan_size()
            else:
                self._size += added
            if self._size > self.max_bytes:
                self._size = self._prune(int(self.max_bytes * 0.8))

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last use, size, path) of every entry; stale temporary files are removed."""
        found = []
        now = time.time()
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    try:
                        if not e.is_file(follow_symlinks=False):
                            continue
                        st = e.stat(follow_symlinks=False)
                        if e.name.startswith(_TMP_PREFIX):
                            if now - st.st_mtime > _STALE_TMP_S:
                                os.unlink(e.path)
                            continue
                        if e.name.endswith(_SUFFIX):
                            found.append((st.st_mtime, st.st_size, Path(e.path)))
                    except OSError:
                        continue
        except OSError:
            pass
        return found

    def _scan_size(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _prune(self, target: int) -> int:
        """Remove the least recently used entries until at most ``target`` bytes are left."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= target:
                break
            try:
                path.unlink()
                total -= size
            except OSError:
                continue
        return total

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._prune(0)
            self._size = 0
