"""Turning a file on disk into indexable text, or a reason why not.

Text detection is by content, not by name: a NUL byte or a high share of control
characters in the first 8 KiB means binary. Decoding tries UTF-8 (with or without BOM),
UTF-16 when a BOM says so, then cp1252 (which covers most legacy Western text and still
rejects five undefined bytes). The encoding used is recorded with the document.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kbindex.daemon.extracting import formats
from kbindex.daemon.extracting.results import Failed
from kbindex.daemon.index.values import RETRY_MTIME_NS as RETRY_MTIME_NS
from kbindex.daemon.index.values import Loaded as Loaded
from kbindex.daemon.index.values import Skipped as Skipped
from kbindex.daemon.index.values import SkipReason as SkipReason
from kbindex.daemon.indexing.titles import extract_title as extract_title

if TYPE_CHECKING:
    from kbindex.daemon.extracting.extractor import Extractor

SAMPLE_BYTES: Final = 8192
CONTROL_RATIO_LIMIT: Final = 0.10
_CONTROL_BYTES: Final = bytes(sorted(frozenset(range(32)) - {9, 10, 12, 13, 27}))


FORM_FEED: Final = "\f"
NOT_EXTRACTED: Final = "not_extracted"
"""A document whose text the cache does not hold (``load(..., extract=False)``); never
recorded: the indexer always extracts."""


class Vanished(Exception):
    """The file disappeared between being listed and being read."""


_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


def display_path(path: str) -> str:
    """``path`` with the bytes of a name that is not valid UTF-8 (surrogate-escaped by
    Python) shown as ``\\xNN``, so that it can be stored, searched and sent to clients."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return path


def real_path(display: str) -> str:
    """The inverse of ``display_path``: each ``\\xNN`` (NN from 80 to ff, the bytes
    that can be invalid UTF-8) back to the byte, as Python's surrogate escape holds it.
    Why no table from display names to real ones: the mapping is a pure function, so
    every component (scan, read, a client's read_file) agrees without shared state."""
    if "\\x" not in display:
        return display
    return _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), display)


_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(st: os.stat_result) -> Skipped:
    return Skipped(
        SkipReason.NOT_REGULAR, f"{kind_of(st.st_mode)}: never opened", 0, st.st_mtime_ns
    )


def _refusal(st: os.stat_result, max_bytes: int) -> Skipped | None:
    """Why a file with this stat is not read at all, or None: not a regular file, or
    over the size cap."""
    if not stat.S_ISREG(st.st_mode):
        return _not_regular(st)
    if st.st_size > max_bytes:
        return Skipped(
            SkipReason.TOO_LARGE,
            f"{st.st_size} bytes, over the limit of {max_bytes}",
            st.st_size,
            st.st_mtime_ns,
        )
    return None


def _unreadable(exc: OSError, size: int) -> Skipped:
    return Skipped(SkipReason.UNREADABLE, exc.strerror or str(exc), size, RETRY_MTIME_NS)


class Escaped(Exception):
    """The file is not where it had to be (``within``): its name leads outside, or a
    directory of its path is a symlink (perhaps swapped in after a check)."""


Within = Callable[[str], bool]
"""Whether a path, as the kernel names it, lies where a file may be read
(``Roots.inside``)."""


def _check_within(fd: int, within: Within) -> None:
    # O_NOFOLLOW guards only the last component: the kernel's own name for the open
    # file shows where it really is. Linux only; elsewhere the check of the name stands.
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return
    if not within(real):
        raise Escaped(real)


def load(
    path: str,
    max_bytes: int,
    within: Within | None = None,
    extract: bool = True,
    documents: Extractor | None = None,
) -> Loaded | Skipped:
    """Read ``path`` as text. Raises Vanished if it no longer exists, and Escaped if
    ``within`` refuses its name or the name of the file opened.

    A document (``extracting.formats``) is its extracted text, read through
    ``documents`` (None: not read, skipped as binary with the extra that would read it):
    from the cache, else from a worker when ``extract``, else skipped as NOT_EXTRACTED.
    Why here: a document is read after the same checks as any file (the roots, no
    symlink, the size cap), from the same bytes.

    ``path`` may be a display path (``display_path``) of a file whose name is not valid
    UTF-8; a file really named so wins. FIFOs, sockets and devices are never opened: an
    ``lstat`` decides first (opening a FIFO would wake a writer waiting for a reader,
    opening a device may act on it). The size and mtime returned are those of the
    opened file (fstat), taken before the read: if the file changes while being read,
    its new mtime differs from the recorded one and the next scan reads it again.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        real = real_path(path)
        if real == path:
            raise Vanished(path) from None
        path = real
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise Vanished(path) from None
        except OSError as exc:
            return _unreadable(exc, 0)
    except OSError as exc:
        return _unreadable(exc, 0)
    refused = _refusal(st, max_bytes)
    if refused is not None:
        return refused
    if within is not None and not within(path):
        raise Escaped(path)
    try:
        # O_NONBLOCK: a FIFO swapped in after the lstat must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise Vanished(path) from None
    except OSError as exc:
        return _unreadable(exc, st.st_size)
    try:
        if within is not None:
            _check_within(fd, within)
        st = os.fstat(fd)
        refused = _refusal(st, max_bytes)  # what was opened, if it changed since lstat
        if refused is not None:
            return refused
        try:
            with os.fdopen(fd, "rb", closefd=False) as fh:
                # Sized to the file, plus a byte that shows it grew: read(max_bytes + 1)
                # would allocate (and unmap) the whole cap for every file.
                data = fh.read(st.st_size + 1)
                if len(data) > st.st_size:  # it grew since fstat: read on to the cap
                    data += fh.read(max_bytes + 1 - len(data))
        except OSError as exc:
            return _unreadable(exc, st.st_size)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return Skipped(
            SkipReason.TOO_LARGE, f"grew past the limit of {max_bytes}", len(data), st.st_mtime_ns
        )
    return _text(data, st.st_size, st.st_mtime_ns, path, extract, documents)


def _text(
    data: bytes, size: int, mtime_ns: int, path: str, extract: bool, documents: Extractor | None
) -> Loaded | Skipped:
    kind = formats.kind(path)
    if kind is None:
        return decode(data, size, mtime_ns, path)
    if documents is None or not documents.reads(kind):
        # A web page is text too; a PDF that happens to be ASCII is not worth indexing
        # as its PDF syntax.
        if kind in formats.TEXT_KINDS:
            return decode(data, size, mtime_ns, path)
        return Skipped(SkipReason.BINARY, formats.unread(kind), size, mtime_ns)
    try:
        outcome = documents.extract(kind, data) if extract else documents.cached(kind, data)
    except OSError as exc:  # no worker could start: tried again at the next scan
        return _unreadable(exc, size)
    if outcome is None:
        return Skipped(NOT_EXTRACTED, "not in the cache", size, mtime_ns)
    if isinstance(outcome, Failed):
        return Skipped(outcome.reason, outcome.detail, size, mtime_ns)
    return Loaded(
        text=outcome.text, encoding=kind, title=outcome.title, size=size, mtime_ns=mtime_ns
    )


def current_text(
    path: str, within: Within, indexed_size: int, documents: Extractor | None = None
) -> str | None:
    """The text of an indexed file as it is on disk now, for what is made of it after
    it was indexed (a hit's snippet, the passages search by meaning embeds, its words
    under a new name): the index keeps no copy. None if it cannot be read as text now:
    gone, unreadable, no longer text, outside the roots (``within``: whatever the index
    says of it), or grown past twice its indexed size and 1 MiB (a file edited since it
    was indexed is not worth reading whole for a passage; the indexer reads it again
    anyway). A document's text comes from the cache of ``documents`` alone: a client
    never waits for an extraction here. The daemon calls it through ``searching.Texts``,
    which holds the roots and the documents' reader."""
    try:
        cap = 2 * indexed_size + (1 << 20)
        loaded = load(path, cap, within=within, extract=False, documents=documents)
    except (Vanished, Escaped):
        return None
    return loaded.text if isinstance(loaded, Loaded) else None


def decode(data: bytes, size: int, mtime_ns: int, name: str | None = None) -> Loaded | Skipped:
    """``data`` as text, with its title (``titles``: by the kind ``name`` says)."""
    text, encoding = _decode_bytes(data)
    if text is None:
        return Skipped(
            SkipReason.BINARY if encoding == "binary" else SkipReason.UNDECODABLE,
            encoding,
            size,
            mtime_ns,
        )
    return Loaded(
        text=text, encoding=encoding, title=extract_title(text, name), size=size, mtime_ns=mtime_ns
    )


def _decode_bytes(data: bytes) -> tuple[str | None, str]:
    if data.startswith(codecs.BOM_UTF8):
        try:
            return data[3:].decode("utf-8"), "utf-8-sig"
        except UnicodeDecodeError:
            return None, "invalid UTF-8 after a UTF-8 byte-order mark"
    for bom, name in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            try:
                return data[2:].decode(name), name
            except UnicodeDecodeError:
                return None, f"invalid {name} after a byte-order mark"
    sample = data[:SAMPLE_BYTES]
    if b"\x00" in sample:
        return None, "binary"
    if sample:
        # Deleting the control bytes in one C pass counts them; a Python loop over
        # every sample would be a large share of a full index.
        controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
        if controls / len(sample) > CONTROL_RATIO_LIMIT:
            return None, "binary"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return None, "neither UTF-8 nor cp1252"


def line_slice(
    text: str, start_line: int | None, end_line: int | None, max_chars: int, paged: bool = False
) -> tuple[str, int, int, int, bool]:
    """Lines ``start_line..end_line`` (1-based, inclusive) of ``text``, numbered.

    Returns (numbered text, first line, last line, total lines, truncated). Each output
    line is ``N| text``. The output stops at ``max_chars``; ``truncated`` says so (a
    first line longer than that is cut short and ends with ``…``).

    ``paged``: ``text`` is a document's (``extracting.pages``): its lines are counted by
    ``\n`` alone, as a hit's line is, and when it has pages an unnumbered ``[page N]``
    row stands above the first line shown and above each line that begins a page.
    """
    lines = text.split("\n") if paged else text.splitlines()
    paged = paged and FORM_FEED in text
    total = len(lines)
    first = max(1, start_line or 1)
    last = min(total, end_line if end_line is not None else total)
    out: list[str] = []
    used = 0
    truncated = False
    width = len(str(max(last, 1)))
    page = 1 + sum(1 for row in lines[: first - 1] if row.startswith(FORM_FEED))
    line_no = first - 1
    for line_no in range(first, last + 1):
        text_of_line = lines[line_no - 1]
        marker = ""
        if paged:
            if text_of_line.startswith(FORM_FEED):
                page += 1
                text_of_line = text_of_line.lstrip(FORM_FEED)
                marker = f"[page {page}]\n"
            elif line_no == first:
                marker = f"[page {page}]\n"
        row = f"{marker}{line_no:>{width}}| {text_of_line}"
        if used + len(row) + 1 > max_chars:
            truncated = True
            if out:
                line_no -= 1
            else:
                # A single line longer than the whole budget: return its start rather
                # than nothing, so a caller always makes progress.
                out.append(row[: max_chars - 1] + "…")
            break
        out.append(row)
        used += len(row) + 1
    return "\n".join(out), first, max(line_no, first - 1), total, truncated
