"""Zip packages (Office Open XML, OpenDocument, EPUB) opened with a guard against bombs,
and their XML parts read as a stream of elements. Runs in the worker.

Why a guard on top of the worker's memory limit: a bomb is told apart from a document
that is merely large by what its directory declares, and named as such, before anything
is inflated. Each part is also read through a cap (a lying directory stops there).
The XML parser is the standard library's expat, which refuses entity expansion past a
fixed amplification (billion laughs) and resolves no external entity.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import IO, Final
from xml.etree import ElementTree

from kbindex.daemon.extracting.results import Failed, Reason

MAX_PART_BYTES: Final = 256 << 20
MAX_RATIO: Final = 200
"""A part inflating more than this many times (past 1 MiB) is a bomb: text XML deflates
about 5 to 20 times."""
OLE_MAGIC: Final = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class Refused(Exception):
    def __init__(self, failed: Failed) -> None:
        super().__init__(failed.detail)
        self.failed = failed


def open_zip(data: bytes, name: str) -> zipfile.ZipFile:
    """``data`` as a zip, or Refused: an OLE file (an Office file with a password is one)
    is encrypted, anything else that is no zip is damaged."""
    if data.startswith(OLE_MAGIC):
        raise Refused(Failed(Reason.ENCRYPTED, f"{name} with a password (an encrypted OLE file)"))
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Refused(Failed(Reason.DAMAGED, f"not a readable zip: {exc}")) from None


def part(package: zipfile.ZipFile, member: str) -> IO[bytes] | None:
    """The part ``member``, opened for reading, or None when the package has none.
    Refused for a bomb."""
    try:
        info = package.getinfo(member)
    except KeyError:
        return None
    if info.flag_bits & 0x1:
        raise Refused(Failed(Reason.ENCRYPTED, f"{member} is encrypted"))
    if info.file_size > MAX_PART_BYTES or (
        info.file_size > (1 << 20) and info.file_size > MAX_RATIO * max(info.compress_size, 1)
    ):
        raise Refused(
            Failed(
                Reason.OVER_LIMIT,
                f"a zip bomb: {member} declares {info.file_size:,} bytes "
                f"from {info.compress_size:,}",
            )
        )
    try:
        return io.BufferedReader(_Capped(package.open(info), MAX_PART_BYTES))
    except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError) as exc:
        raise Refused(Failed(Reason.DAMAGED, f"{member}: {exc}")) from None


def required(package: zipfile.ZipFile, member: str) -> IO[bytes]:
    """The part ``member``; Refused as damaged when the package has none."""
    stream = part(package, member)
    if stream is None:
        raise Refused(Failed(Reason.DAMAGED, f"no {member} in it"))
    return stream


def first_text(package: zipfile.ZipFile, member: str, name: str) -> str:
    """The text of the first element called ``name`` in the part ``member`` ("" if
    none): a title in the package's metadata."""
    stream = part(package, member)
    if stream is None:
        return ""
    for event, element in elements(stream):
        if event == "end" and local(element.tag) == name:
            return (element.text or "").strip()
    return ""


def elements(stream: IO[bytes]) -> Iterator[tuple[str, ElementTree.Element]]:
    """("start" | "end", element) of an XML part, with namespaces as ``{uri}local``;
    a part that is not well-formed is Refused as damaged."""
    try:
        yield from ElementTree.iterparse(stream, events=("start", "end"))
    except (ElementTree.ParseError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise Refused(Failed(Reason.DAMAGED, f"malformed XML: {exc}")) from None


def local(tag: str) -> str:
    """The local name of ``{uri}local``."""
    return tag.rpartition("}")[2]


class _Capped(io.RawIOBase):
    """A part's stream that ends in a bomb's refusal past ``cap`` bytes inflated."""

    def __init__(self, inner: IO[bytes], cap: int) -> None:
        self.inner = inner
        self.left = cap

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(min(len(buffer), self.left + 1))
        self.left -= len(data)
        if self.left < 0:
            raise Refused(Failed(Reason.OVER_LIMIT, "a zip bomb: a part inflates past its cap"))
        buffer[: len(data)] = data
        return len(data)
