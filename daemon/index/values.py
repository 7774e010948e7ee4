"""The values that cross the index interface, in either direction.

What the indexer hands a backend (``Seen``, a prepared ``Document`` or a ``Skipped``,
the ``Stamp`` a scan compares under ``SizeCaps``), what a backend answers (``File``,
``Hit``, ``Indexed``, ``Record``, ``Stats``, ``Checked``, ``Described``, ``Candidates``,
``Links``) and what a caller asks with (a grep's trigram ``Query`` and ``Words``; the
query plan is ``plan``'s). Plain data: this module imports nothing of the daemon, so
every layer and every backend may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias, TypeVar

if TYPE_CHECKING:
    from kbindex.daemon.index.interface import Renamer

T = TypeVar("T")

# ---------------------------------------------------------------- what a scan sees


class Seen(NamedTuple):
    """A file as listed, to be read. A named tuple, not a frozen dataclass: a first scan
    builds one per file, and a frozen dataclass sets each field through
    ``object.__setattr__``; its path relative to the root is computed, not kept (a
    first scan of a kernel tree holds 78,000 of them while it indexes)."""

    path: str
    root: str
    size: int
    mtime_ns: int
    ctime_ns: int = 0
    ino: int = 0
    dev: int = 0

    @property
    def signature(self) -> tuple[int, int, int, int, int]:
        """What git's index compares to tell a file changed without reading it. Size and
        mtime alone miss an edit that keeps them (``cp -p``, ``touch -r``, ``rsync -t``,
        ``tar x``, a restored backup): the change time cannot be set back, and a file
        replaced by another gets a new inode."""
        return self[2:7]

    @property
    def relpath(self) -> str:
        return self.path[len(self.root) + 1 :]


Stamp = tuple[str, int, int, int, int, int]
"""A file as listed: (path, size, mtime_ns, ctime_ns, ino, dev), the order of the rows
``Index.known`` returns. A plain tuple, hashed and compared in C: an unchanged file
costs a rescan this tuple and a set lookup, no other Python object or call. The last
five are ``Seen.signature``."""


@dataclass(frozen=True, slots=True)
class SizeCaps:
    """The size caps a scan reads files under, as ``Index.known`` applies them: a file
    whose name ends with one of ``suffixes`` has the cap ``document``, any other the cap
    ``text``. A suffix is matched as ``os.path.splitext`` finds it (a name of dots and
    the suffix alone, like ``.pdf``, has none) and regardless of ASCII case; give
    them in lower case ASCII, with their dot (``.pdf``)."""

    text: int
    document: int
    suffixes: frozenset[str] = frozenset()

    @classmethod
    def one(cls, cap: int) -> SizeCaps:
        """The same cap for every file."""
        return cls(cap, cap)


# ---------------------------------------------------------------- what reading gives


class SkipReason:
    """Why a file seen in a root is not in the index (stable strings, shown to users)."""

    BINARY: Final = "binary"
    TOO_LARGE: Final = "too_large"
    UNDECODABLE: Final = "undecodable"
    UNREADABLE: Final = "unreadable"
    NOT_REGULAR: Final = "not_regular"


@dataclass(frozen=True, slots=True)
class Loaded:
    text: str
    encoding: str
    title: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skipped:
    reason: str
    detail: str
    size: int
    mtime_ns: int


RETRY_MTIME_NS: Final = -1
"""Recorded as the mtime of a file that could not be read (permission denied, too many
open files, an I/O error): it matches no file on disk, so the next scan or event tries
again. Why: fixing the cause (``chmod``, closing files) does not change the file's own
mtime, and a skip recorded with the real mtime would stay until the file is edited."""


# ---------------------------------------------------------------- what a backend writes


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """What a file's front matter and text hold (``indexing.frontmatter``)."""

    fields: tuple[tuple[str, str], ...] = ()
    tags: tuple[str, ...] = ()
    dates: tuple[tuple[str, float], ...] = ()
    """``(key, POSIX seconds)`` for each of ``created``, ``date``, ``updated`` that reads
    as a date."""
    problem: str = ""
    """Why the front matter was not read ("" when it was, or when there is none)."""


@dataclass(frozen=True, slots=True)
class Link:
    """A link from a file to another one of its root (``indexing.links``)."""

    target: str
    """The path relative to the root; for a wikilink, its name as written (``Note.md``
    for ``[[Note]]``)."""
    text: str
    line: int
    """Where it is in the linking file, from 1."""
    wiki: bool = False


@dataclass(frozen=True, slots=True)
class Structure:
    """What a file's text holds besides its words, as the index keeps it for filters
    and links (``indexing.structure``)."""

    front: FrontMatter = FrontMatter()
    links: tuple[Link, ...] = ()


NO_STRUCTURE: Final = Structure()


Row = tuple[str, str, str, str, str]
"""The values of a document's full-text columns, in the order ``bm25()`` weights them:
``name`` (path relative to its root), ``title``, ``body``, ``subwords`` and ``grams``
(``index.tokens``)."""


@dataclass(frozen=True, slots=True)
class Document:
    """A file ready to be written: what was loaded, its column values, and the text of
    its words for the exact index (``indexing.documents.row_and_words``).

    Why a type of its own: the derived columns cost about as much Python time as
    reading the files, so the indexer builds them in its read-ahead worker and the
    writer thread spends its time inside the database, which releases the GIL.
    """

    loaded: Loaded
    row: Row
    exact: str
    grams: str
    structure: Structure = NO_STRUCTURE


class Update(NamedTuple):
    """A file seen by a scan, what reading it gave (the document the indexer prepared,
    ``indexing.documents.prepare``, or why it is skipped) and its kind
    (``indexing.kinds``): every value of its rows, so a backend writes them as given."""

    seen: Seen
    given: Document | Skipped
    kind: str


class Move(NamedTuple):
    """The file ``old``, or every file under it, re-keyed to ``new`` in ``root``."""

    old: str
    new: str
    root: str


@dataclass(frozen=True, slots=True)
class Batch:
    """What ``Index.apply`` writes in one transaction: files moved (their rows made
    again by ``renamer``, which a batch with moves has), files read (written as given),
    and files gone."""

    updates: Sequence[Update] = ()
    deletes: Sequence[str] = ()
    moves: Sequence[Move] = ()
    renamer: Renamer | None = None


@dataclass(frozen=True, slots=True)
class Renamed:
    """A moved document's column values and structure under its new name, for an index
    that keeps no text (read from the file at its new path); its trigrams do not change
    with its name."""

    row: Row
    exact: str
    structure: Structure


Boosts = tuple[tuple[str, float], ...]
"""How much each kind of file counts in ranking (``indexing.kinds.Classifier.boosts``):
(kind, factor) pairs, each factor at most 1."""


FileValues = tuple[int, int, str | None, str | None, str | None]
"""What a backend records of a file besides its path and stamp: size, mtime_ns,
encoding (indexed files), skip reason and detail (skipped files)."""


def recorded(update: Update) -> tuple[Document | None, FileValues]:
    """What a backend writes for ``update``: the document (None for a skipped file,
    which has none) and the file's values."""
    seen, given, _ = update
    if isinstance(given, Document):
        loaded = given.loaded
        return given, (loaded.size, loaded.mtime_ns, loaded.encoding, None, None)
    size, mtime_ns = given.size or seen.size, given.mtime_ns or seen.mtime_ns
    return None, (size, mtime_ns, None, given.reason, given.detail)


# ---------------------------------------------------------------- what a backend answers


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
class Indexed(File):
    """An indexed file as ``Index.files`` lists it."""

    id: int
    indexed_at: float
    """When it was last written (search by meaning embeds it again when this moves)."""


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


class Links(NamedTuple):
    """What ``Index.links`` answers: the links, and how many files they lead to or come
    from, each counted once, all of them whatever was left out."""

    links: list[Linked]
    files: int

    @classmethod
    def first_of_each(cls, found: list[Linked], limit: int | None) -> Links:
        """A file's own links ``found`` (``limit`` None: all of them), or the first link
        to each file they lead to, for the first ``limit`` of those files."""
        first: dict[str, Linked] = {}
        for x in found:
            first.setdefault(x.target, x)
        return cls(found if limit is None else list(first.values())[:limit], len(first))


class Listing(NamedTuple):
    files: list[Indexed]
    total: int
    """How many files the listing would hold without its limit."""


FileState = tuple[str | None, str | None]
"""What the index recorded of a file: its skip reason and detail (None, None: indexed)."""


@dataclass(frozen=True, slots=True)
class Record:
    """An indexed document, for what is computed from its text (snippets of hits found
    by meaning, passages to embed)."""

    id: int
    file: File
    title: str
    body: str | None
    """Its text; None when it cannot be read now (an index that keeps no copy of the
    text reads the file: it may be gone, or unreadable for a moment)."""


@dataclass(frozen=True, slots=True)
class Counts:
    indexed: int
    skipped: dict[str, int]
    per_root: dict[str, int]
    per_machine: dict[str, int] = field(default_factory=dict)
    """Indexed files per machine, in an index several machines share."""
    machines: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    """In an index several machines share: each machine's state (``live``, ``behind``:
    its heartbeat is late, ``gone``: no daemon writes it) and seconds since its last
    heartbeat."""


@dataclass(frozen=True, slots=True)
class Stats:
    counts: Counts
    size_bytes: int
    """The index's bytes on disk (or in the database, for a shared one)."""


@dataclass(frozen=True, slots=True)
class Checked:
    """``kbctl doctor``'s look at the index: its integrity and its size."""

    integrity: str
    """``ok`` or what the check found."""
    size_bytes: int
    details: dict[str, int] = field(default_factory=dict)
    """What the backend adds, by name (SQLite: ``db_bytes``, ``wal_bytes``)."""


class Described(NamedTuple):
    """What status says of the backend, and its condition."""

    name: str
    server: str
    """The database engine and where it is, never credentials."""
    machine: str = ""
    """This daemon's machine name, in an index several machines share."""
    recovered: str = ""
    """Why the index was found damaged and where it was kept, if it was ("" otherwise)."""
    rebuilding: str = ""
    """Why the index is being rebuilt from the files, until it is ready ("" then):
    answers come from the old index as it was, or from the new one as it fills."""
    generation: int = 0
    """Bumped when reads move to another file (a rebuild, or the rebuilt index taking
    over): a read of an older file says nothing of the new one."""


# ---------------------------------------------------------------- what a caller asks with


@dataclass(frozen=True, slots=True)
class And:
    parts: frozenset[Query]


@dataclass(frozen=True, slots=True)
class Or:
    parts: frozenset[Query]


Query: TypeAlias = str | And | Or | None
"""What a grep pattern requires of a file's trigrams (``grep.trigrams``): a trigram, an
AND or OR of queries, or ``ANY`` (None): every file."""


@dataclass(frozen=True, slots=True)
class Words:
    """What a literal grep pattern requires of a file's words (``grep.phrases``)."""

    phrases: str
    """An FTS5 MATCH expression on ``docs``."""
    unless: str | None = None
    """An FTS5 MATCH expression on ``docs_grams``: files it admits stay candidates
    whatever their words (``-w`` edges next to a non-ASCII byte)."""


PENDING_PATHS: Final = 1000
"""Pending changes looked up one by one, at most; past it (a checkout in progress)
grep reads every file."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """The files a grep reads: those the index cannot rule out."""

    paths: list[str]
    """Display paths (``textfile.display_path``), sorted folder by folder."""
    scanned_all: bool
    size: int = 0
    """Their bytes, as last indexed (new files count nothing)."""
    uncounted: list[str] | None = None
    """Files whose ``--count`` or ``-l`` may tell otherwise than their lines: a NUL in
    the text (``rg -uu`` stops there, ``--count`` and ``-l`` given the name do not, and
    a walk's ``--count`` prints nothing once the file matched), a change not indexed
    yet, a new file; for a grep of every file, also those waiting to be read again (after
    the upgrade to v9, not marked yet). Read as lines (``Grepper``), or by name beside a
    walk (``sweep``). None: not known."""

    @classmethod
    def of(
        cls, sizes: dict[str, int], *, scanned_all: bool, uncounted: list[str] | None = None
    ) -> Candidates:
        """The files of ``sizes`` (path: bytes) in ripgrep's order."""
        ordered = sorted(sizes, key=order)
        return cls(ordered, scanned_all, sum(sizes.values()), uncounted)


def order(path: str) -> str:
    """A display path's sort key in ripgrep's order."""
    # Folder by folder, as ripgrep sorts paths: dma/ before dma-buf/ (whole strings
    # would put '-' before '/'). '/' as NUL, which sorts below any character a name
    # holds, gives that order by plain string comparison (lists of parts are slower).
    return path.replace("/", "\0")


# ---------------------------------------------------------------- shared by every backend

NUL_MARK: Final = "000000"
"""The token of three NULs, which no document's trigrams hold (its NULs are spaces by
then: ``indexing.documents.row_and_words``), added to those of a text with a NUL in it (past
the 8 KiB that text detection samples). ``rg -uu --count`` prints nothing for such a
file once it has matched, so grep's walks (``grep.sweep``) read these by name."""
STATEMENT_CHARS: Final = 1 << 20
"""Text per write statement, at most about: bounds the copies a batch makes (the
statement's text, the database's parse, about three times the text) whatever the batch
size."""


def statements(items: Iterable[T], chars: Callable[[T], int]) -> Iterator[list[T]]:
    """``items`` in lists of about STATEMENT_CHARS of text each (``chars``: an item's),
    a statement each: for every backend's writer."""
    chunk: list[T] = []
    size = 0
    for item in items:
        chunk.append(item)
        size += chars(item)
        if size >= STATEMENT_CHARS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk
