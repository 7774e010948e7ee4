"""The index as the rest of the daemon sees it: what it holds and what it answers.

Two backends implement ``Index``: ``sqlite.SqliteIndex`` (the default: one file in the
state directory, written by this daemon alone) and ``postgres.PgIndex`` (a PostgreSQL
database that daemons on several machines share). The indexer writes through it, the
service and search by meaning read through it, and neither knows which one it has: a
third backend is a folder of its own and a line in ``backends.BACKENDS``.

The values that cross the interface are defined in ``values``, so a backend needs
nothing of another one, and this package imports nothing else of the daemon. Errors
cross it as the backend's own exceptions; ``Index.failure`` says what each one means
for the daemon (rebuild, retry later, or a plain bug).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from kbindex.daemon.index.plan import NO_FILTERS, Filters, Plan
from kbindex.daemon.index.values import (
    Batch,
    Candidates,
    Checked,
    Described,
    Document,
    FileState,
    Links,
    Listing,
    Query,
    Record,
    Renamed,
    SizeCaps,
    Stamp,
    Stats,
    Words,
)

Failure = Literal["damaged", "unwritable", "unavailable"]
"""``damaged``: the index's data is broken; rebuild it from the files. ``unwritable``:
writes fail for now (a full disk); reads still work. ``unavailable``: the backend
cannot be reached for now (a database server restarting); retry later."""


Maintenance = Literal["refresh", "bulk"]
"""What ``Index.maintain`` follows: a refresh, or one that wrote many files."""


class IndexRefused(Exception):
    """The index cannot be used by this daemon at all (written by a newer kbindexd):
    restarting would not help."""


@dataclass(frozen=True, slots=True)
class Opened:
    """What ``Index.open`` found.

    ``ready``: the index serves and is written. ``beside``: it was made by an older
    kbindexd; a new one is built beside it, and the old one answers searches until the
    new one's first scan of every root has committed (``Index.built``). ``afresh``: the
    old one cannot answer (damaged, or too old to read): it was moved aside or waits
    to be replaced, and searches answer from the new one as it fills."""

    state: Literal["ready", "beside", "afresh"]
    reason: str = ""
    """Why the index is being rebuilt ("" when ready)."""


class BadQuery(Exception):
    """The query cannot be run (raw syntax error, unknown mode, too long, a glob that
    does not parse or runs past its deadline)."""


class NotIndexed(Exception):
    """The path is inside a root but is not an indexed file."""


class TooSlow(Exception):
    """A read ran past its deadline (a grep's candidate files)."""


Texts = Callable[[str, int], "str | None"]
"""The text of an indexed file (its path, its size as indexed) as it is now, or None
when it cannot be read as text now: handed to an index that keeps no copy of the text
by the layer that reads files for clients (``searching``), which checks the roots."""


class Renamer(Protocol):
    """What a move needs from above the seam (the indexer's), for each file it moves."""

    def kind(self, root: str, relpath: str) -> str:
        """The file's kind at its new place (``indexing.kinds``)."""
        ...

    def read(self, path: str, relpath: str, size: int) -> Renamed | None:
        """Its document's values under its new name, read from the file now at
        ``path`` (``size``: as indexed), for an index that keeps no text; None when it
        cannot be read now."""
        ...

    def restored(self, relpath: str, title: str, body: str, encoding: str | None) -> Document:
        """Its document under its new name, made again from the text an index keeps."""
        ...


class Index(Protocol):
    """What the daemon needs of an index. The write side is called from one thread at a
    time (the indexer's writer); the read side from any number of reader threads."""

    def failure(self, exc: BaseException) -> Failure | None:
        """What an exception raised by this index means (None: not the index's)."""
        ...

    def describe(self) -> Described:
        """The backend, where it is, and its condition (recovered, rebuilding, the
        generation of the file reads see)."""
        ...

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> Opened:
        """Open the index; raises IndexRefused when this daemon must not use it."""
        ...

    def close(self) -> None: ...
    def rebuild(self, reason: str) -> None:
        """Start afresh after damage found while serving (the damaged data kept aside
        where the backend can); the next scan of every root fills the index again."""
        ...

    def built(self) -> None:
        """A scan of every root has committed since ``open`` or ``rebuild``: an index
        being rebuilt is complete and takes over (nothing to do when ready). Called by
        the writer, with no write in progress."""
        ...

    # ---------------------------------------------------------------- writes

    def claim(self, roots: Sequence[str]) -> None:
        """Take the writing of these roots for this daemon; raises (``unwritable``)
        while another daemon writes one of them (a shared index)."""
        ...

    def known(self, prefixes: Sequence[str] | None, caps: SizeCaps) -> set[Stamp]:
        """The stamp of every file this daemon indexed (or skipped), or of those under
        the given absolute prefixes, as the scan compares it with the files, in one read:
        a file whose recorded decision its size cap in ``caps`` now reverses (skipped as
        too large but under it, or indexed but over it) has size -1, so its stamp
        matches no file and the file is read again. Only a file between the two caps
        has its name looked at, in the backend's query: no code runs per file."""
        ...

    def apply(self, batch: Batch) -> int:
        """Write one batch, all or nothing; returns how many files it moved."""
        ...

    def forget(self, root: str) -> int:
        """Drop every file of ``root`` (a root removed at runtime); returns how many."""
        ...

    def reclassify(self, root: str, kind_of: Callable[[str, str], str]) -> int:
        """Give every file of ``root`` the kind ``kind_of(root, relpath)`` says (a reload
        changed the rules), without reading any file; returns how many changed kind."""
        ...

    def maintain(self, after: Maintenance) -> None:
        """What the index needs after a refresh wrote (``bulk``: many files), so that
        what was written is where readers look and searches stay fast: SQLite settles
        or truncates its log and merges its segments once enough was rewritten;
        PostgreSQL vacuums and analyses after a bulk write. The refresh is done when
        this runs: a failure here is logged, not the refresh's."""
        ...

    # ---------------------------------------------------------------- reads

    def rank(self, plan: Plan) -> tuple[list[tuple[int, float]], int, str]:
        """The best ``plan.limit`` documents of ``plan``, within its filters, as
        (document id, score) pairs (higher is better), how many match, and the mode
        that found them (``searching.hits`` shows them)."""
        ...

    def files(
        self,
        path_filter: str | None,
        limit: int | None = None,
        filters: Filters = NO_FILTERS,
        *,
        newest: bool = False,
    ) -> Listing:
        """The indexed files within ``path_filter`` (None: all) that ``filters`` keep
        (its own ``path`` left aside: ``path_filter`` is the one path rule here), by
        root and path (``newest``: the most recently modified first), at most ``limit``
        (None: all of them), and how many there are: for a listing, for a search by
        meaning within a path and filters (their ids), for the files to embed."""
        ...

    def state(self, path: str, *, under: bool = False) -> FileState | None:
        """What the index recorded of the file ``path`` (or, ``under``, of the first
        file at or under it as a directory); None when it has no row."""
        ...

    def stats(self) -> Stats:
        """How many files it holds (indexed, skipped, per root and machine) and its
        bytes on disk."""
        ...

    def check(self) -> Checked: ...
    def candidates(
        self,
        query: Query,
        path_filter: str | None,
        pending: Sequence[str],
        new: Sequence[tuple[str, str]],
        words: Words | None,
        filters: Filters = NO_FILTERS,
    ) -> Candidates:
        """The files that may hold a match of a grep: those the trigram ``query`` and
        the ``words`` admit, those under a ``pending`` path (a change not indexed yet)
        and the ``new`` files (path, relpath) not indexed yet, within ``path_filter``;
        past PENDING_PATHS pending paths, every indexed file. ``filters`` (issue 41)
        keep only the indexed files they admit (no pending or new file: the index does
        not know what they are yet)."""
        ...

    def records(self, ids: Sequence[int]) -> list[Record]:
        """These documents with their text (from the index's copy, or read by its
        ``Texts``), for those still indexed (in no particular order)."""
        ...

    def retire_machine(self, name: str) -> int:
        """Remove a machine no daemon writes any more, and its rows, from a shared index
        (IndexRefused on a backend of one machine, or while a daemon writes it)."""
        ...

    def links(self, path: str, direction: Literal["out", "in"], limit: int | None = None) -> Links:
        """The links of the file ``path`` (``out``), or those that lead to it (``in``),
        each once, in path and line order. With ``limit``, only the first link to (or
        from) each file at the other end, for the first ``limit`` of those files, so a
        note a thousand notes link to answers with a few rows; ``Links.files`` counts
        the files at the other end either way."""
        ...
