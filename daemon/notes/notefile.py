"""One note on disk, reached from its writable root without following a link.

A writable root may be a folder shared with other users (a group's), and any of them
can swap a folder in it for a symbolic link at any moment. So a note is never used by
name from the root: its folder is opened from the root's own directory, one component
at a time, each refused when it is a link (``O_NOFOLLOW``) or not a folder
(``O_DIRECTORY``), and every later step (reading the note, creating the temporary
file, the rename, unlink and mkdir, the folder's fsync) is made relative to that open
folder. What another member of the folder can still do is what they could do without
the daemon: rename or remove entries of the folder (a note written into a folder they
then move lands in that folder, wherever it now is; it never goes through a link).

Every open is non-blocking and anything but a regular file is refused, so a FIFO or a
socket at a note's path answers with an error instead of holding a worker thread (which
shutdown would wait for).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import Final

from kbindex.daemon import sandbox
from kbindex.daemon.indexing.ignore import WRITING_MARK
from kbindex.daemon.roots import Located

_FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
NAME_MAX: Final = 255
"""Bytes in one name where the file system does not say (Linux's, most file systems')."""
TEMPORARY_TRIES: Final = 100


class NoteError(Exception):
    """A note operation refused or failed; ``code`` is a POSIX name (``EACCES``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def error_code(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "EIO")


class NoteFile:
    """The note at ``located``: ``open`` walks to its folder and keeps that folder open
    (one descriptor, whatever the depth); the other methods act relative to it. Folders
    that do not exist yet are made by ``replace`` and ``move_to``, the same way."""

    def __init__(self, located: Located, max_bytes: int) -> None:
        self.located = located
        self.max_bytes = max_bytes
        """The size cap: an existing note over it is never read (another member of a
        shared folder can make a note of any size)."""
        *self._folders, self.name = located.relpath.split("/")
        self._fd = -1
        self._depth = 0
        """How many of ``_folders`` the open ``_fd`` is down; the rest do not exist yet."""

    # ------------------------------------------------------------ the walk

    def open(self) -> None:
        """Open the deepest existing folder of the note and check what the note is:
        a link, a folder or anything but a regular file is refused here, before a
        caller takes a lock."""
        try:
            self._fd = os.open(self.located.root, _FOLDER)
        except OSError as exc:
            raise NoteError(
                error_code(exc), f"cannot open the root {self.located.root}: {exc.strerror}"
            ) from None
        self._descend(create=False)
        if self.exists_folder:
            try:
                self._check(self._stat(self.name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise self._failed("open", exc) from None

    @property
    def exists_folder(self) -> bool:
        """Whether the note's folder exists (was opened)."""
        return self._depth == len(self._folders)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _descend(self, *, create: bool) -> None:
        while self._depth < len(self._folders):
            part = self._folders[self._depth]
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=self._fd)
                    os.fsync(self._fd)  # the new folder's entry survives a crash
                except FileExistsError:
                    pass  # made since, by us or another: opened (and checked) below
                except OSError as exc:
                    raise self._failed("make a folder for", exc) from None
            try:
                fd = os.open(part, _FOLDER, dir_fd=self._fd)
            except FileNotFoundError:
                if create:
                    raise NoteError(
                        "ENOENT", f"{self._prefix(self._depth + 1)} vanished while being made"
                    ) from None
                return
            except OSError as exc:
                raise self._not_a_folder(part, exc) from None
            os.close(self._fd)
            self._fd = fd
            self._depth += 1

    def _not_a_folder(self, part: str, exc: OSError) -> NoteError:
        prefix = self._prefix(self._depth + 1)
        # O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR (ELOOP without O_DIRECTORY).
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            try:
                mode = self._stat(part).st_mode
            except OSError:
                mode = 0
            if stat.S_ISLNK(mode):
                return self._link(prefix)
            if stat.S_ISDIR(mode):  # a link a moment ago: someone swaps them
                return NoteError("EACCES", f"{prefix} changed while being opened: try again")
            return NoteError("ENOTDIR", f"{prefix} is not a folder")
        return self._failed("open the folder of", exc)

    def _prefix(self, depth: int) -> str:
        return "/".join(self._folders[:depth])

    # ------------------------------------------------------------ the note itself

    def _stat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self._fd, follow_symlinks=False)

    def _check(self, st: os.stat_result) -> None:
        """Refuse anything at a note's name but a regular file."""
        relpath = self.located.relpath
        if stat.S_ISLNK(st.st_mode):
            raise self._link(relpath)
        if stat.S_ISDIR(st.st_mode):
            raise NoteError("EISDIR", f"{relpath} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NoteError("EINVAL", f"{relpath} is not a regular file (a FIFO, socket or device)")

    def _link(self, relpath: str) -> NoteError:
        return NoteError(
            "EACCES",
            f"{relpath} is a symbolic link in {self.located.root}: notes follow no link",
        )

    def read(self) -> bytes | None:
        """The note's content, or None when it does not exist."""
        if not self.exists_folder:
            return None
        try:
            fd = os.open(self.name, _READ, dir_fd=self._fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket
                with contextlib.suppress(OSError):  # gone since: the error below
                    self._check(self._stat(self.name))
            raise self._failed("read", exc) from None
        with os.fdopen(fd, "rb") as note:
            st = os.fstat(fd)
            self._check(st)  # what was opened, should it have changed
            try:
                data = note.read(self.max_bytes + 1) if st.st_size <= self.max_bytes else b""
            except OSError as exc:
                raise self._failed("read", exc) from None
            if st.st_size > self.max_bytes or len(data) > self.max_bytes:
                size = max(st.st_size, len(data))
                raise NoteError(
                    "EFBIG",
                    f"{self.located.relpath} is {size:,} bytes, over the file size cap of"
                    f" {self.max_bytes:,}: it is not read, nor changed through the daemon",
                )
            return data

    def replace(self, data: bytes) -> None:
        """Write the note atomically: a temporary file beside it, fsynced, renamed over
        it, then the folder fsynced so the rename itself survives a crash. An existing
        note keeps its permission bits (not set-id bits another user may have set)."""
        self._descend(create=True)
        try:
            st = self._stat(self.name)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        else:
            self._check(st)
            mode = stat.S_IMODE(st.st_mode) & 0o777
        fd, temporary = self._temporary()
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fchmod(out.fileno(), mode)
                os.fsync(out.fileno())
            os.rename(temporary, self.name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=self._fd)
            raise self._failed("write", exc) from None
        self._sync()

    def _temporary(self) -> tuple[int, str]:
        try:
            limit = os.fpathconf(self._fd, "PC_NAME_MAX")
        except (OSError, ValueError):
            limit = NAME_MAX
        for _ in range(TEMPORARY_TRIES):
            name = temporary_name(self.name, limit)
            try:
                return os.open(name, _CREATE, 0o600, dir_fd=self._fd), name
            except FileExistsError:
                continue
            except OSError as exc:
                raise self._failed("write", exc) from None
        raise NoteError("EEXIST", f"cannot write {self.located.relpath}: no free temporary name")

    def unlink(self) -> None:
        if not self.exists_folder:
            raise NoteError("ENOENT", f"{self.located.relpath} does not exist")
        try:
            self._check(self._stat(self.name))
            os.unlink(self.name, dir_fd=self._fd)
        except OSError as exc:
            raise self._failed("delete", exc) from None
        self._sync()

    def move_to(self, target: NoteFile, *, overwrite: bool) -> None:
        """Rename the note to ``target`` (both folders opened as above); an existing
        target is replaced only with ``overwrite``."""
        target._descend(create=True)
        try:
            st = target._stat(target.name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._failed("move", exc) from None
        else:
            target._check(st)
            if not overwrite:
                raise NoteError(
                    "EEXIST", f"{target.located.relpath} exists; pass overwrite to replace it"
                )
        if not self.exists_folder:
            raise NoteError("ENOENT", f"{self.located.relpath} does not exist")
        try:
            self._check(self._stat(self.name))
            os.rename(self.name, target.name, src_dir_fd=self._fd, dst_dir_fd=target._fd)
        except OSError as exc:
            raise self._failed("move", exc) from None
        target._sync()
        if os.path.samestat(os.fstat(self._fd), os.fstat(target._fd)):
            return
        self._sync()

    def _sync(self) -> None:
        os.fsync(self._fd)

    def _failed(self, doing: str, exc: OSError) -> NoteError:
        hint = sandbox.read_only_hint(exc)
        why = f"{exc.strerror} ({hint})" if hint else exc.strerror
        return NoteError(error_code(exc), f"cannot {doing} {self.located.relpath}: {why}")


def temporary_name(name: str, limit: int = NAME_MAX) -> str:
    """``.NAME.kbindex-tmp-XXXXXXXX``, never indexed (the mark in it). NAME is cut, by
    whole characters, when the whole would be longer than ``limit`` bytes."""
    suffix = f"{WRITING_MARK}{secrets.token_hex(4)}"
    room = limit - 1 - len(suffix)
    stem = name
    while stem and len(os.fsencode(stem)) > room:
        stem = stem[: min(len(stem) - 1, room)]
    return f".{stem}{suffix}"


def _umask() -> int:
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022
