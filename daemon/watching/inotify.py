"""watchdog's inotify observer, made to report what watchdog handles silently.

Everything that touches watchdog's private ``inotify_c`` module is here, so a watchdog
upgrade touches this file only. Each root gets its own observer and inotify instance,
so one root's failure does not touch the others. What is reported, through callbacks
called in watchdog's threads:

- a watch refused at the inotify limit (ENOSPC/EMFILE), also for a subdirectory, where
  watchdog only raises for the root;
- a directory not watched because it is unreadable (watchdog skips it without a word);
- a kernel queue overflow (events were lost).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any, Final

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyEmitter
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD

EVENT_TYPES: Final[list[type[FileSystemEvent]]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileModifiedEvent,  # also subscribes to IN_ATTRIB: a touch or utime changes the mtime
    FileAttribEvent,
    DirAttribEvent,  # a chmod that makes a directory readable again
    FileClosedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
]
"""Not IN_OPEN / IN_CLOSE_NOWRITE: reading files (the indexer does) must not wake us."""
LIMIT_ERRNOS: Final = (errno.ENOSPC, errno.EMFILE)
"""What adding a watch raises at fs.inotify.max_user_watches / max_user_instances."""


class _InotifyFD(InotifyFD):
    """watchdog's inotify reader, reporting refused watches and queue overflows."""

    def __init__(
        self,
        on_limit: Callable[[OSError], None],
        on_overflow: Callable[[], None],
        on_denied: Callable[[bytes], None],
    ) -> None:
        self._on_limit = on_limit
        self._on_overflow = on_overflow
        self._on_denied = on_denied
        super().__init__()

    def add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
        try:
            wd = super().add_callback(path, mask, callback, id_)
        except OSError as exc:
            if exc.errno in LIMIT_ERRNOS:
                self._on_limit(exc)
            raise
        if wd == -1:  # EACCES, which watchdog swallows: the directory is not watched
            self._on_denied(path)
        return wd

    def handle_event(self, event: InotifyEvent) -> None:
        if event.is_queue_overflow:
            self._on_overflow()
        super().handle_event(event)


class RootObserver(BaseObserver):
    """An InotifyObserver with its own reader (one inotify instance per root)."""

    def __init__(
        self,
        on_limit: Callable[[OSError], None],
        on_overflow: Callable[[], None],
        on_denied: Callable[[bytes], None],
    ) -> None:
        self._fd = _InotifyFD(on_limit, on_overflow, on_denied)
        self._fd.start()
        super().__init__(InotifyEmitter, inotify_fd=self._fd)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self._close_reader()

    def _close_reader(self) -> None:
        self._fd.stop()
        self._fd.join()

    @property
    def healthy(self) -> bool:
        """Whether the observer and its emitter still run (a deleted root stops them)."""
        return self.is_alive() and bool(self.emitters) and all(e.is_alive() for e in self.emitters)


class _Handler(FileSystemEventHandler):
    def __init__(self, on_event: Callable[[FileSystemEvent], None]) -> None:
        self._on_event = on_event

    def dispatch(self, event: FileSystemEvent) -> None:
        # Synthetic events (one per file of a moved or moved-in directory) are covered
        # by the directory's own event: the whole directory is re-keyed or walked.
        if not event.is_synthetic:
            self._on_event(event)


def start_observer(
    root: str,
    on_event: Callable[[FileSystemEvent], None],
    on_limit: Callable[[OSError], None],
    on_overflow: Callable[[], None],
    on_denied: Callable[[bytes], None],
) -> RootObserver:
    """Watch ``root`` recursively. Blocking (call it in a worker thread): adding a
    watch per directory of a large tree takes a while. Raises what watchdog raises
    when the root itself cannot be watched (LIMIT_ERRNOS at the limit)."""
    observer = RootObserver(on_limit, on_overflow, on_denied)
    try:
        observer.schedule(_Handler(on_event), root, recursive=True, event_filter=EVENT_TYPES)
        observer.start()
    except BaseException:
        observer._close_reader()
        raise
    return observer


def stop_observer(observer: RootObserver) -> None:
    """Blocking: unschedules (removing the inotify watches) and closes the reader."""
    observer.stop()
    if observer.is_alive():
        observer.join()
