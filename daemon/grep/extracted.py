"""grep over documents: ripgrep reads their extracted text, not their bytes.

A PDF, an Office file or an EPUB holds no line ripgrep could match; what the index
holds of it is its extracted text (``extracting``), and its trigrams are that text's,
so the index admits a document by it. A grep writes the cached text of each candidate
document into a scratch directory of its own under the state directory (never inside
a root), names those files to ripgrep in the document's place, and reads the records
back under the document's path: a document costs a grep the reading of its cached
text, never an extraction (one not in the cache yet has no lines to match).

The lines of a document are numbered within its page (pages begin with a form feed,
``extracting.pages``), and each is marked as extracted, so that a reader knows the line
is not a line of the file's bytes.
"""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from kbindex.daemon.extracting import formats, pages
from kbindex.daemon.extracting.extractor import installed
from kbindex.daemon.extracting.pages import FORM_FEED
from kbindex.daemon.indexing import textfile

SCRATCH_PREFIX: Final = "grep-"
"""The scratch directories of greps in the state directory; one left by a daemon that
died is removed at the next start (``Documents.clean``)."""


class Documents:
    """Which candidates are documents, and their text for ripgrep."""

    def __init__(
        self,
        state_dir: Path,
        current: Callable[[str, int], str | None],
        max_bytes: Callable[[], int],
    ) -> None:
        self.state_dir = state_dir
        self.current = current
        """A document's text as it is now, from the documents' cache (``Texts.current``)."""
        self.max_bytes = max_bytes
        """A document larger than this is not read (the documents' size cap, which a
        reload may change)."""
        kinds = installed()
        self._suffixes = tuple(ext for ext, kind in formats.KINDS.items() if kind in kinds)

    def holds(self, path: str) -> bool:
        """Whether ``path`` is a document whose indexed text is extracted: ripgrep
        reads that text, not the file. (Asked of every candidate of a grep: the end of
        the name alone, a third of the time ``formats.kind`` takes.)"""
        return bool(self._suffixes) and path[-6:].lower().endswith(self._suffixes)

    def scratch(self) -> Scratch:
        return Scratch(self)

    def clean(self) -> None:
        """Removes the scratch directories a grep left (a daemon killed mid-grep)."""
        try:
            entries = list(os.scandir(self.state_dir))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(SCRATCH_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


class Scratch:
    """One grep's documents: their text in files of a directory of its own, and each
    one's page starts. Removed by ``close``."""

    def __init__(self, documents: Documents) -> None:
        self.documents = documents
        self.directory: str | None = None
        self.originals: dict[bytes, bytes] = {}
        """Scratch file name -> the document's name as ripgrep would print it."""
        self.page_starts: dict[str, list[int]] = {}
        """Display path -> the line (1-based, of the whole text) each page starts at."""
        self._lock = threading.Lock()
        self._numbers = itertools.count()

    def name(self, path: str) -> bytes | None:
        """The file ripgrep reads for the document ``path`` (a display path): its
        cached text written to the scratch directory; None when there is none (not
        extracted yet, gone, changed, outside the roots). Blocks: run in a thread."""
        text = self.documents.current(path, self.documents.max_bytes() // 2)
        if text is None:
            return None
        with self._lock:  # two chunks of a grep may be named at once (``Ahead``)
            if self.directory is None:
                self.directory = tempfile.mkdtemp(
                    prefix=SCRATCH_PREFIX, dir=self.documents.state_dir
                )
            scratch = os.path.join(self.directory, str(next(self._numbers)))
        name = os.fsencode(scratch)
        self.originals[name] = os.fsencode(textfile.real_path(path))
        starts = pages.starts(text)
        self.page_starts[path] = starts if len(starts) > 1 else []
        # Without the form feeds that begin pages: ``^`` matches at a page's first
        # line as at any other (the page starts are kept above).
        with open(scratch, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text.replace("\n" + FORM_FEED, "\n"))
        return name

    def original(self, name: bytes) -> bytes:
        """The name ripgrep printed, as the document's when it is a scratch file."""
        return self.originals.get(name, name)

    def locate(self, path: str, line: int) -> tuple[int, int] | None:
        """(page, line within the page) of line ``line`` of document ``path``'s text
        ((0, line) for a text of one page); None for a file that is not a document."""
        starts = self.page_starts.get(path)
        if starts is None:
            return None
        if not starts:
            return 0, line
        page = bisect.bisect_right(starts, line)
        return page, line - starts[page - 1] + 1

    def close(self) -> None:
        """Removes the scratch files. Blocks: run in a thread."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
