"""What documents gave, kept by the sha256 of their bytes in the state directory.

One file per document (zlib-compressed msgpack of the ``Reply``), named by the digest and
the kind, under a directory named by the readers' version: a change to the readers
starts afresh. A failure is kept too, so a copy of a hostile file costs nothing either.
The total is bounded: past ``max_bytes`` the entries least recently used (their mtime,
touched on each hit) go first, down to nine tenths of the bound.
"""

from __future__ import annotations

import contextlib
import os
import threading
import zlib
from pathlib import Path
from typing import Final

import msgspec
from kbindex.daemon.extracting.results import Outcome, Reply

VERSION: Final = 1


class Cache:
    def __init__(self, state_dir: Path, max_bytes: int) -> None:
        self.directory = state_dir / f"extracted-v{VERSION}"
        self.max_bytes = max_bytes
        self._size: int | None = None
        self._lock = threading.Lock()
        self._decoder = msgspec.msgpack.Decoder(Reply)

    def _path(self, digest: str, kind: str) -> Path:
        return self.directory / digest[:2] / f"{digest}.{kind}"

    def get(self, digest: str, kind: str) -> Outcome | None:
        path = self._path(digest, kind)
        try:
            data = path.read_bytes()
            outcome = self._decoder.decode(zlib.decompress(data)).outcome
        except FileNotFoundError:
            return None
        except (OSError, zlib.error, msgspec.DecodeError):
            return None  # damaged: extracted again, and replaced
        with contextlib.suppress(OSError):
            os.utime(path)
        return outcome

    def put(self, digest: str, kind: str, outcome: Outcome) -> None:
        data = zlib.compress(msgspec.msgpack.encode(Reply.of(outcome)), 6)
        path = self._path(digest, kind)
        temporary = path.with_name(f".{path.name}.{threading.get_ident()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                old = path.stat().st_size
            except FileNotFoundError:
                old = 0
            temporary.write_bytes(data)
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)
            return  # a full disk costs the cache, not the index
        with self._lock:
            if self._size is not None:
                self._size += len(data) - old
        if self.size_bytes() > self.max_bytes:
            self._evict()

    def bound(self, max_bytes: int) -> None:
        """A new bound (a reload): entries past it go now."""
        self.max_bytes = max_bytes
        if self.size_bytes() > max_bytes:
            self._evict()

    def size_bytes(self) -> int:
        with self._lock:
            if self._size is None:
                self._size = sum(size for _, size, _ in self._entries())
            return self._size

    def _entries(self) -> list[tuple[int, int, str]]:
        """(mtime_ns, size, path) of every entry."""
        found = []
        try:
            folders = list(os.scandir(self.directory))
        except OSError:
            return []
        for folder in folders:
            try:
                with os.scandir(folder.path) as entries:
                    for entry in entries:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        found.append((st.st_mtime_ns, st.st_size, entry.path))
            except OSError:
                continue
        return found

    def _evict(self) -> None:
        with self._lock:
            entries = sorted(self._entries())
            total = sum(size for _, size, _ in entries)
            target = self.max_bytes * 9 // 10
            for _, size, path in entries:
                if total <= target:
                    break
                try:
                    os.unlink(path)
                except OSError:
                    continue
                total -= size
            self._size = total
