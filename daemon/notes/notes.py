"""Notes: clients create, edit, append to, move and delete text files in writable roots.

A root is writable only when its configuration says so (``writable = true``); the
daemon writes nowhere else. A client's path is checked here by its text (inside a
writable root, not through ``..``, of a sane depth and length, named in printable
characters); ``notefile`` then reaches the note without following a link and makes
every change relative to the folder it opened, so another user of a shared root cannot
steer it elsewhere. Every change is atomic (a temporary file in the same folder, fsync,
rename, the folder fsynced; an existing file's permissions kept), so a crash leaves the
old content or the new, never a mix, and is indexed before the reply: a search right
after finds it. The watcher sees the same change a moment later and finds
the file's signature (size, mtime, ctime, inode) already recorded, so nothing is read
twice.

Each reply carries the file's content hash; ``if_match`` refuses a change when the file
no longer has that hash (another agent, or the user's editor, changed it), so no one's
work is lost silently. Changes are serialized by one lock: the check and the rename
cannot interleave with another client's. An external editor can still write between
the two; that window is the rename's, microseconds.

Errors carry POSIX names (``EROFS``, ``EACCES``, ...; ``NoteError.code``) and one
sentence.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import unicodedata
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.notes.notefile import NAME_MAX, NoteError, NoteFile, error_code
from kbindex.daemon.roots import MAX_PATH_CHARS, Located, Roots
from kbindex.daemon.settings import Settings
from kbindex.proto.messages import AppendNote, DeleteNote, EditNote, MoveNote, WriteNote

log = logging.getLogger(__name__)

HASH_CHARS: Final = 16
MAX_DEPTH: Final = 32
"""Folders a note's path may hold inside its root."""
REFUSED_CATEGORIES: Final = frozenset({"Cc", "Zl", "Zp"})
"""Control characters, and the line and paragraph separators that split lines too."""
REFUSED_BIDI: Final = frozenset(map(chr, (*range(0x202A, 0x202F), *range(0x2066, 0x206A))))
"""The bidirectional embeddings, overrides and isolates (CVE-2021-42574): a name holding
one shows other than it reads wherever it is printed unescaped (kbctl escapes the same
set on a terminal, ``ctl/render.py``)."""
NoteRequest = WriteNote | EditNote | AppendNote | MoveNote | DeleteNote


@dataclass(frozen=True, slots=True)
class Written:
    path: str
    hash: str
    """Of the content now on disk ("" after a delete)."""
    lines: int
    size: int
    created: bool = False
    index_error: str = ""
    """Why the note, written, is not searchable yet (a full disk): the daemon's own
    retries index it once they can. The change itself is done: not to be repeated."""


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:HASH_CHARS]


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


REMEMBERED: Final = 1000
"""Changes kept for ``changes_since``; a front end further behind is told it missed some."""


class Notes:
    def __init__(self, settings: Callable[[], Settings], roots: Roots, indexer: Indexer) -> None:
        self._settings = settings
        """The settings in force (``Control.settings``)."""
        self.roots = roots
        self.indexer = indexer
        self._lock = anyio.Lock()
        # Cursors start at the clock so that one from before a restart is not mistaken
        # for a recent one.
        self._cursor = time.time_ns() // 1000
        self._log: deque[tuple[int, str]] = deque(maxlen=REMEMBERED)
        self._changed = anyio.Event()

    async def changes_since(self, since: int, wait: float) -> tuple[int, list[str], bool]:
        """(cursor, paths changed after ``since``, whether some were forgotten)."""
        if since and since == self._cursor and wait > 0:
            with anyio.move_on_after(wait):
                await self._changed.wait()
        if not since:
            return self._cursor, [], False
        first = self._log[0][0] if self._log else self._cursor + 1
        missed = since > self._cursor or since < first - 1
        paths = list(dict.fromkeys(p for n, p in self._log if n > since))
        return self._cursor, paths, missed

    def written(self) -> set[str]:
        """The notes written, edited, moved or deleted through the daemon that it still
        remembers (``changes_since``'s log)."""
        return {p for _, p in self._log}

    def wake(self) -> None:
        """Ends every waiting ``changes_since`` (shutdown)."""
        self._changed.set()
        self._changed = anyio.Event()

    def _record(self, *paths: Path) -> None:
        for path in paths:
            self._cursor += 1
            self._log.append((self._cursor, str(path)))
        self.wake()

    @property
    def settings(self) -> Settings:
        """The settings in force (a reload may change which roots are writable)."""
        return self._settings()

    async def handle(self, request: NoteRequest) -> Written:
        match request:
            case WriteNote():
                return await self.write(
                    request.path, request.content, if_match=request.if_match, title=request.title
                )
            case EditNote():
                return await self.edit(
                    request.path, request.old_text, request.new_text, if_match=request.if_match
                )
            case AppendNote():
                return await self.append(request.path, request.text)
            case MoveNote():
                return await self.move(request.src, request.dst, overwrite=request.overwrite)
            case DeleteNote():
                return await self.delete(request.path, if_match=request.if_match)

    # ------------------------------------------------------------ operations

    async def write(
        self, path: str, content: str, *, if_match: str | None = None, title: str | None = None
    ) -> Written:
        """Create or replace a note; a Markdown note with no H1 gets ``# title`` first."""
        async with self._opened(path) as note:
            located = note.located
            markdown = located.path.suffix.lower() in (".md", ".markdown")
            if title and markdown and not any(ln.startswith("# ") for ln in content.splitlines()):
                content = f"# {title.strip()}\n\n{content}"
            data = self._encode(content)
            async with self._lock:
                old = await self._current(note, must_exist=False)
                self._check_match(located, old, if_match)
                await anyio.to_thread.run_sync(note.replace, data)
                problem = await self._index(located)
        return Written(
            str(located.path), content_hash(data), _lines(data), len(data), old is None, problem
        )

    async def edit(
        self, path: str, old_text: str, new_text: str, *, if_match: str | None = None
    ) -> Written:
        """Replace the one occurrence of ``old_text`` with ``new_text``."""
        if not old_text:
            raise NoteError("EINVAL", "old_text is empty: give the exact text to replace")
        async with self._opened(path) as note, self._lock:
            located = note.located
            old = await self._current(note, must_exist=True)
            assert old is not None
            self._check_match(located, old, if_match)
            text = self._decode(located, old)
            found = text.count(old_text)
            if found != 1:
                raise NoteError("EINVAL", _occurrences(located, text, old_text, found))
            data = self._encode(text.replace(old_text, new_text, 1))
            await anyio.to_thread.run_sync(note.replace, data)
            problem = await self._index(located)
        return Written(
            str(located.path), content_hash(data), _lines(data), len(data), index_error=problem
        )

    async def append(self, path: str, text: str) -> Written:
        """Add ``text`` at the end (on a line of its own); creates the note if needed."""
        async with self._opened(path) as note, self._lock:
            located = note.located
            old = await self._current(note, must_exist=False)
            before = self._decode(located, old) if old else ""
            if before and not before.endswith("\n"):
                before += "\n"
            data = self._encode(before + text)
            await anyio.to_thread.run_sync(note.replace, data)
            problem = await self._index(located)
        return Written(
            str(located.path), content_hash(data), _lines(data), len(data), old is None, problem
        )

    async def move(self, src: str, dst: str, *, overwrite: bool = False) -> Written:
        async with self._opened(src) as source, self._opened(dst) as target, self._lock:
            data = await self._current(source, must_exist=True)
            assert data is not None
            there = target.located
            if source.located.path == there.path:
                return Written(str(there.path), content_hash(data), _lines(data), len(data))

            def rename() -> None:
                source.move_to(target, overwrite=overwrite)

            await anyio.to_thread.run_sync(rename)
            # Two one-file refreshes, not a re-key: the note is small, and a failure
            # of either is reported like a write's.
            gone, arrived = await self._index(source.located), await self._index(there)
            problem = gone or arrived
        return Written(str(there.path), content_hash(data), _lines(data), len(data), True, problem)

    async def delete(self, path: str, *, if_match: str | None = None) -> Written:
        async with self._opened(path) as note, self._lock:
            located = note.located
            old = await self._current(note, must_exist=True)
            self._check_match(located, old, if_match)
            await anyio.to_thread.run_sync(note.unlink)
            problem = await self._index(located)
        return Written(str(located.path), "", 0, 0, index_error=problem)

    # ------------------------------------------------------------ checks

    def writable_roots(self) -> list[Path]:
        return [r for r in self.roots.paths if self.settings.writable(r)]

    @asynccontextmanager
    async def _opened(self, raw: str) -> AsyncIterator[NoteFile]:
        """The note a client's path names, its folder open (``NoteFile``): refused when
        the path leaves a writable root, goes through a link, or names a folder, a FIFO
        or anything but a regular file; all this before the caller takes the lock."""
        note = NoteFile(self._target(raw), self.settings.max_file_bytes)
        try:
            await anyio.to_thread.run_sync(note.open)
            located = note.located
            rules = self.indexer.rules
            try:
                if note.exists_folder:
                    reason = rules.explain(str(located.root), str(located.path))
                else:
                    reason = rules.ignored_file(note.name)
            except OSError as exc:  # the rules look by name: a folder swapped meanwhile
                raise NoteError(
                    error_code(exc), f"cannot check {located.relpath}: {exc.strerror}"
                ) from None
            if reason is not None:
                raise NoteError("EINVAL", f"{located.relpath} would not be indexed: {reason}")
            yield note
        finally:
            note.close()

    def _target(self, raw: str) -> Located:
        """Where a client's path leads, from its text alone: inside a writable root,
        not through ``..``, of a sane depth and length, without control characters.
        Links and what is on disk are ``NoteFile``'s to check."""
        if not raw or "\x00" in raw:
            raise NoteError("EINVAL", "the path is empty or holds a NUL byte")
        if len(os.fsencode(raw)) > MAX_PATH_CHARS:
            raise NoteError(
                "ENAMETOOLONG", f"the path is longer than {MAX_PATH_CHARS} bytes: {_short(raw)}"
            )
        writable = self.writable_roots()
        if not writable:
            raise NoteError("EROFS", "no root is writable; set writable = true for one")
        try:
            given = Path(raw).expanduser()
        except RuntimeError:  # ~name of no user
            raise NoteError("EINVAL", f"{_short(raw)}: no such user's home") from None
        if given.is_absolute():
            lexical = Path(os.path.normpath(given))
        else:
            choices = [Path(os.path.normpath(r / given)) for r in writable]
            existing = [c for c in choices if os.path.lexists(c)]
            if len(writable) > 1 and len(existing) != 1:
                raise NoteError(
                    "EINVAL",
                    f"{_short(raw)} could be in more than one writable root: give a full path",
                )
            lexical = (existing or choices)[0]
        root = next((r for r in self.roots.paths if lexical.is_relative_to(r)), None)
        if root is None:
            raise NoteError("EACCES", f"{_short(raw)} is outside the indexed roots")
        if not self.settings.writable(root):
            raise NoteError("EROFS", f"{root} is read-only (writable = true makes it writable)")
        if lexical == root:
            raise NoteError("EISDIR", f"{_short(raw)} is a directory")
        relpath = lexical.relative_to(root).as_posix()
        parts = relpath.split("/")
        for part in parts:
            if any(
                unicodedata.category(c) in REFUSED_CATEGORIES or c in REFUSED_BIDI for c in part
            ):
                raise NoteError(
                    "EINVAL",
                    f"the name {part!a} holds a control character, a line separator or a"
                    " bidirectional override: notes are named in printable text",
                )
            if len(os.fsencode(part)) > NAME_MAX:
                raise NoteError(
                    "ENAMETOOLONG", f"a name is longer than {NAME_MAX} bytes: {_short(part)}"
                )
        if len(parts) > MAX_DEPTH + 1:
            raise NoteError(
                "EINVAL", f"{_short(relpath)} is {len(parts) - 1} folders deep; at most {MAX_DEPTH}"
            )
        return Located(root, lexical, relpath)

    def _encode(self, content: str) -> bytes:
        if "\x00" in content:
            raise NoteError("EILSEQ", "the content holds a NUL byte: notes are text")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise NoteError("EILSEQ", "the content is not valid Unicode text") from None
        if len(data) > self.settings.max_file_bytes:
            cap = self.settings.max_file_size_mb
            raise NoteError("EFBIG", f"{len(data):,} bytes is over the {cap:g} MB file size cap")
        return data

    @staticmethod
    def _decode(located: Located, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteError("EILSEQ", f"{located.relpath} is not UTF-8 text") from None

    @staticmethod
    async def _current(note: NoteFile, *, must_exist: bool) -> bytes | None:
        data = await anyio.to_thread.run_sync(note.read)
        if data is None and must_exist:
            raise NoteError("ENOENT", f"{note.located.relpath} does not exist")
        return data

    @staticmethod
    def _check_match(located: Located, old: bytes | None, if_match: str | None) -> None:
        if if_match is None:
            return
        now = "" if old is None else content_hash(old)
        if if_match == "" and now:
            raise NoteError(
                "EEXIST",
                f'{located.relpath} already exists (hash {now}); if_match "" asks for a'
                " new note: pass that hash to replace it",
            )
        if now != if_match:
            state = "does not exist" if old is None else f"has hash {now}"
            raise NoteError(
                "ECONFLICT",
                f"{located.relpath} changed since {if_match} (it now {state}): read it again",
            )

    async def _index(self, located: Located) -> str:
        """Index the note now; returns why that failed ("" when it did not)."""
        self._record(located.path)
        try:
            await self.indexer.refresh([located])
        except Exception as exc:  # the write is done; the periodic retries index it
            log.warning("note %s written but not indexed: %s", located.path, exc)
            return str(exc) or type(exc).__name__
        return ""


def _occurrences(located: Located, text: str, old_text: str, found: int) -> str:
    if not found:
        return f"old_text is not in {located.relpath}: copy it exactly, with its whitespace"
    lines: list[str] = []
    start = 0
    while (at := text.find(old_text, start)) >= 0 and len(lines) < 5:
        lines.append(str(text.count("\n", 0, at) + 1))
        start = at + 1
    return (
        f"old_text occurs {found} times in {located.relpath} (lines {', '.join(lines)}):"
        " include more of the text around it"
    )


def _short(text: str) -> str:
    """A path or name cut for an error message, its control characters escaped."""
    cut = text if len(text) <= 60 else f"{text[:28]}...{text[-28:]}"
    return cut if cut.isprintable() else ascii(cut)
