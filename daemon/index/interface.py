"""The index as the rest of the daemon sees it: what it holds and what it answers.

Two backends implement ``Index``: ``sqlite.SqliteIndex`` (the default: one file in the
state directory, written by this daemon alone) and ``postgres.PgIndex`` (a PostgreSQL
database that daemons on several machines share). The indexer writes through it, the
service and search by meaning read through it, and neither knows which one it has: a
third backend is a class of its own and a line in ``app``.

The values that cross the interface are defined here, so a backend needs nothing of
another one. Errors cross it as the backend's own exceptions; ``Index.failure`` says
what each one means for the daemon (rebuild, retry later, or a plain bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from kbindex.daemon.index.plan import NO_FILTERS, Filters
from kbindex.daemon.indexing import documents
from kbindex.daemon.indexing.scanner import Seen, Stamp
from kbindex.daemon.indexing.textfile import Loaded, Skipped

if TYPE_CHECKING:
    from kbindex.daemon.backends.sqlite.candidates import Candidates
    from kbindex.daemon.grep import phrases, trigrams
    from kbindex.daemon.searching.query import Compiled

Failure = Literal["damaged", "unwritable", "unavailable"]
"""``damaged``: the index's data is broken; rebuild it from the files. ``unwritable``:
writes fail for now (a full disk); reads still work. ``unavailable``: the backend
cannot be reached for now (a database server restarting); retry later."""


class IndexRefused(Exception):
    """The index cannot be used by this daemon at all (a shared database written by a
    newer kbindexd): restarting would not help."""


Update = tuple[Seen, documents.Document | Loaded | Skipped]
"""A file seen by a scan and what reading it gave. The indexer passes a ``Document``
(prepared in its reader thread); a ``Loaded`` is prepared by the backend."""


FileValues = tuple[int, int, str | None, str | None, str | None]
"""What a backend records of a file besides its path and stamp: size, mtime_ns,
encoding (indexed files), skip reason and detail (skipped files)."""


def recorded(update: Update) -> tuple[documents.Document | None, FileValues]:
    """What a backend writes for ``update``: the document (None for a skipped file,
    which has none) and the file's values."""
    seen, given = update
    outcome = documents.prepare(seen.relpath, given) if isinstance(given, Loaded) else given
    if isinstance(outcome, documents.Document):
        loaded = outcome.loaded
        return outcome, (loaded.size, loaded.mtime_ns, loaded.encoding, None, None)
    size, mtime_ns = outcome.size or seen.size, outcome.mtime_ns or seen.mtime_ns
    return None, (size, mtime_ns, None, outcome.reason, outcome.detail)


class NotIndexed(Exception):
    """The path is inside a root but is not an indexed file."""


@dataclass(frozen=True, slots=True)
class File:
    """An indexed file as a listing or a hit shows it."""

    path: str
    root: str
    relpath: str
    size: int
    mtime_ns: int
    machine: str = field(default="", kw_only=True)
    """The machine whose disk holds it, in an index several machines share ("" in an
    index of this machine alone)."""


@dataclass(frozen=True, slots=True)
class Hit(File):
    """A document found, with where it matched best."""

    title: str
    score: float
    """Higher is better (bm25 for words)."""
    snippet: str
    line: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    total: int
    mode: str


@dataclass(frozen=True, slots=True)
class Stored:
    """An indexed document, for what is computed from its text (snippets of hits found
    by meaning, passages to embed)."""

    id: int
    file: File
    title: str
    body: str | None
    """Its text; None when it cannot be read now (an index that keeps no copy of the
    text reads the file: it may be gone, or unreadable for a moment)."""


@dataclass(frozen=True, slots=True)
class Linked:
    """A link between two files of one root, as the index holds it (issue 41)."""

    source: str
    """The linking file (absolute)."""
    target: str
    """The file linked to (absolute): where a Markdown link leads, or the file a
    wikilink's name resolves to; for a wikilink that names no file, the root joined
    with the name as written."""
    text: str
    line: int
    found: bool
    """Whether the index holds the target (indexed or skipped); False: a broken link,
    unless the file exists but is left out of the index (the service looks)."""
    wiki: bool = False


class Embeddable(NamedTuple):
    """An indexed file as search by meaning decides whether to (re-)embed it."""

    id: int
    indexed_at: float
    root: str
    size: int


@dataclass(frozen=True, slots=True)
class Counts:
    indexed: int
    skipped: dict[str, int]
    per_root: dict[str, int]
    per_machine: dict[str, int] = field(default_factory=dict)
    """Indexed files per machine, in an index several machines share."""


class Checked(NamedTuple):
    """``kbctl doctor``'s look at the index: its integrity and its size on disk."""

    integrity: str
    """``ok`` or what the check found."""
    db_bytes: int
    wal_bytes: int


class Described(NamedTuple):
    """What status says of the backend."""

    name: str
    server: str
    """The database engine and where it is, never credentials."""
    machine: str = ""
    """This daemon's machine name, in an index several machines share."""


class Index(Protocol):
    """What the daemon needs of an index. The write side is called from one thread at a
    time (the indexer's writer); the read side from any number of reader threads."""

    recovered: str
    """Why the index was found unusable and started afresh, if it was ("" otherwise)."""

    @property
    def writes(self) -> int:
        """Committed writes so far: what was counted from the index stays true until this
        changes."""
        ...

    @property
    def generation(self) -> int:
        """Bumped by ``rebuild``: a read of an older index says nothing of the new one."""
        ...

    @property
    def merge_possible(self) -> bool:
        """Cheap: whether ``optimize_due`` could say yes."""
        ...

    def failure(self, exc: BaseException) -> Failure | None:
        """What an exception raised by this index means (None: not the index's)."""
        ...

    def describe(self) -> Described: ...

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> None: ...
    def close(self) -> None: ...
    def rebuild(self, reason: str) -> Path | None:
        """Start afresh after damage; returns where the old data was kept, if anywhere."""
        ...

    # ---------------------------------------------------------------- writes

    def claim(self, roots: Sequence[str]) -> None:
        """Take the writing of these roots for this daemon; raises (``unwritable``)
        while another daemon writes one of them (a shared index)."""
        ...

    def known(self, prefixes: Sequence[str] | None, max_file_bytes: int) -> set[Stamp]:
        """The stamp of every file this daemon indexed (or skipped), or of those under
        the given absolute prefixes, as the scan compares it with the files: a file
        whose recorded decision the size cap ``max_file_bytes`` now reverses (skipped as
        too large but under it, or indexed but over it) has size -1, so its stamp
        matches no file and the file is read again."""
        ...

    def apply(self, updates: Sequence[Update], deletes: Sequence[str]) -> None:
        """Write one batch, all or nothing."""
        ...

    def move(self, old: str, new: str, new_root: str) -> int:
        """Re-key the file ``old``, or every file under it, to ``new``; returns how many."""
        ...

    def remove_root(self, root: str) -> int: ...
    def optimize_due(self) -> bool: ...
    def optimize(self) -> None: ...
    def checkpoint(self) -> None:
        """After a large refresh: give back what the write left behind (a WAL)."""
        ...

    def settle(self) -> None:
        """Wait until what was committed is durable where readers look."""
        ...

    # ---------------------------------------------------------------- reads

    # ``filters`` (issue 41) restrict every read inside its query, before its limit.
    def search(
        self,
        compiled: Compiled,
        limit: int,
        path_filter: str | None,
        filters: Filters = NO_FILTERS,
    ) -> SearchResult: ...
    def rank(
        self,
        compiled: Compiled,
        limit: int,
        path_filter: str | None,
        filters: Filters = NO_FILTERS,
    ) -> tuple[list[tuple[int, float]], int, str]:
        """``search`` as (document id, score) pairs, the total and the mode."""
        ...

    def find_files(
        self, glob: str, limit: int, filters: Filters = NO_FILTERS, newest: bool = False
    ) -> tuple[list[File], int]:
        """The indexed files ``glob`` and ``filters`` keep, in path order (``newest``:
        the most recently modified first), and how many there are."""
        ...

    def file_state(self, path: str) -> tuple[str | None, str | None] | None:
        """(skip_reason, skip_detail) of a known file, None when the index has no row."""
        ...

    def holds(self, path: str) -> bool:
        """Whether the index has a row for ``path`` or anything under it."""
        ...

    def counts(self) -> Counts: ...
    def indexed_count(self) -> int: ...
    def size_bytes(self) -> int: ...
    def check(self) -> Checked: ...
    def grep_candidates(
        self,
        query: trigrams.Query,
        path_filter: str | None,
        pending: Sequence[str],
        new: Sequence[tuple[str, str]],
        words: phrases.Words | None,
        filters: Filters = NO_FILTERS,
    ) -> Candidates:
        """The files that may hold a match of a grep (see ``candidates.find``)."""
        ...

    def stored(self, ids: Sequence[int]) -> list[Stored]:
        """These documents' text, for those still indexed (in no particular order)."""
        ...

    def allowed(self, path_filter: str | None, filters: Filters = NO_FILTERS) -> list[int]:
        """The ids of the indexed files a path filter and ``filters`` keep, ascending."""
        ...

    def embeddable(self) -> list[Embeddable]: ...

    def links(self, path: str, direction: Literal["out", "in"]) -> list[Linked]:
        """The links of the file ``path`` (``out``), or those that lead to it (``in``),
        each once, in path and line order."""
        ...
