"""Wire messages between kbindexd and its clients (kbctl, kbindex-mcp).

Every request and reply is a msgspec Struct in one of two tagged unions: requests are
told apart by their ``op`` field, replies by their ``type`` field. Schema evolution
rule (msgspec docs/schema-evolution): every field added after version 1 gets a default,
and no wire type forbids unknown fields, so an older front end can talk to a newer
daemon and the reverse.

Requests carry an ``id``; every reply to that request echoes it, so one connection can
carry many requests in flight. A request may be answered by several ``Progress``
replies before its final reply (``Refresh`` with ``wait=True``).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

PROTOCOL_VERSION: Final = 1
"""Bumped only for incompatible changes; additive changes keep the number."""

MIN_LIMIT: Final = 1
MAX_LIMIT: Final = 100
MAX_PATTERN_CHARS: Final = 4096
"""Longest glob or path filter accepted (as long as the longest path): SQLite refuses
much longer GLOB patterns with an error of its own."""

Pattern = Annotated[str, msgspec.Meta(max_length=MAX_PATTERN_CHARS)]


class Request(msgspec.Struct, tag_field="op", kw_only=True, frozen=True):
    id: int = 0


class Hello(Request, tag="hello", frozen=True):
    """First request of a connection: the client's protocol version and name."""

    version: int
    client: str = ""


class Ping(Request, tag="ping", frozen=True):
    pass


class Status(Request, tag="status", frozen=True):
    pass


MAX_FILTER_VALUES: Final = 20
FilterValue = Annotated[str, msgspec.Meta(max_length=1000)]
FilterValues = Annotated[list[FilterValue], msgspec.Meta(max_length=MAX_FILTER_VALUES)]


class Filtered(Request, kw_only=True, frozen=True):
    """Filters on what a file holds besides its words (issue 41), the same for search,
    grep and find_files, applied inside the query (before its limit). Each value that
    cannot be read is a ``bad_filter`` error; a filter no indexed file passes gets a
    note."""

    kind: FilterValues = []
    """Any of these kinds: doc, code, test, config, data, generated, changelog,
    vendored, other."""
    tag: FilterValues = []
    """Every one of these tags (``#x`` in a Markdown text or ``tags:`` in its front
    matter)."""
    field: FilterValues = []
    """Every one of these ``key=value`` pairs of the front matter."""
    modified: FilterValue | None = None
    """Last modified in a span: ``7d``, ``2 weeks``, ``2024-05``, ``2024-01..2024-03``."""
    date: FilterValues = []
    """A front matter date (``created``, ``date``, ``updated``; ``created:7d`` names
    one) in each span."""
    scope: FilterValues = []
    """Any of these roots, by name (``name`` in the configuration, else the folder's)."""


class Search(Filtered, tag="search", kw_only=True, frozen=True):
    query: str
    limit: int = 10
    path: Pattern | None = None
    """A glob (``docs/*.md``) or a folder (``docs/``), relative to a root or absolute;
    a first folder named as a root is also taken inside that root (``notes/`` for the
    root ``/home/me/notes``). A filter that matches no indexed file gets a note."""
    mode: str = "auto"
    """``auto`` (``hybrid`` where search by meaning is on, else words: every term,
    then any) | ``words`` (that word search, whatever else is on) | ``all`` (every
    term) | ``any`` (ranked OR) | ``raw`` (FTS5 syntax) | ``hybrid`` (words and meaning
    fused) | ``semantic`` (meaning alone)."""
    recent: str = ""
    """A preference for recent files in the ranking: ``on`` (with the daemon's
    ``recency_half_life``, else 90 days), a half-life (``30d``, ``2 weeks``), or ``off``;
    "" : the daemon's setting (none unless configured)."""


MAX_GREP_LIMIT: Final = 1000
MAX_CONTEXT: Final = 20


class Grep(Filtered, tag="grep", kw_only=True, frozen=True):
    """Lines of the indexed files that match a regex or a literal, as ripgrep
    (``rg -uu``) prints them for the same files and flags."""

    pattern: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATTERN_CHARS)]
    """A regex in ripgrep's syntax (Rust's regex crate), or a literal with ``fixed``."""
    fixed: bool = False
    """``-F``: the pattern is a literal string."""
    ignore_case: bool = False
    """``-i``."""
    word: bool = False
    """``-w``: only matches surrounded by word boundaries."""
    path: Pattern | None = None
    """As ``Search.path``: a glob or a path prefix, relative to a root or absolute."""
    before: Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT)] = 0
    """``-B``: lines of context before each match."""
    after: Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT)] = 0
    """``-A``: lines of context after each match."""
    max_count: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """``-m``: at most this many matching lines per file."""
    files_only: bool = False
    """``-l``: the files with a match, not their lines."""
    limit: int = 100
    """Matching lines (or files, with ``files_only``) returned, at most MAX_GREP_LIMIT."""


class WriteNote(Request, tag="write_note", frozen=True):
    """Create or replace a text file in a writable root (atomic; indexed before the reply)."""

    path: str
    """Absolute, or relative to the writable root."""
    content: str
    if_match: str | None = None
    """Refuse (``ECONFLICT``) unless the file's content hash is this ("" : must not exist)."""
    title: str | None = None
    """For a Markdown note with no ``# `` heading: one is added."""


class EditNote(Request, tag="edit_note", frozen=True):
    """Replace the one occurrence of ``old_text``; none or several is an error."""

    path: str
    old_text: str
    new_text: str
    if_match: str | None = None


class AppendNote(Request, tag="append_note", frozen=True):
    """Add text at the end of a note, on a line of its own; creates it if needed."""

    path: str
    text: str


class MoveNote(Request, tag="move_note", frozen=True):
    src: str
    dst: str
    overwrite: bool = False


class DeleteNote(Request, tag="delete_note", frozen=True):
    path: str
    if_match: str | None = None


MAX_WAIT_SECONDS: Final = 20.0


class NoteChanges(Request, tag="note_changes", frozen=True):
    """The notes changed through the daemon after ``since`` (a cursor from an earlier
    reply; 0 for the current cursor and no paths). Waits up to ``wait_seconds`` for a
    change when there is none yet (a long poll: MCP front ends use it to tell
    subscribed clients a resource changed)."""

    since: Annotated[int, msgspec.Meta(ge=0)] = 0
    wait_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_WAIT_SECONDS)] = 0.0


class Refresh(Request, tag="refresh", frozen=True):
    paths: list[str] = []
    """Files, directories or roots to re-check; empty means every root."""
    full: bool = False
    """Re-read every file, not only those whose size or mtime changed."""
    wait: bool = False
    """Answer when the refresh is done, with Progress replies on the way."""


class ReadFile(Request, tag="read_file", frozen=True):
    path: str
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    """A document's page (1-based): its lines, instead of ``start_line``/``end_line``."""


class FindFiles(Filtered, tag="find_files", kw_only=True, frozen=True):
    glob: Pattern = "*"
    limit: int = 100
    newest: bool = False
    """Newest first (the most recently modified): with ``modified``, what changed
    lately; else in path order."""


class Links(Request, tag="links", frozen=True):
    """The links of an indexed file, or (``backlinks``) the links that lead to it, from
    the index: Markdown links and ``[[wikilinks]]`` between files of one root."""

    path: str
    backlinks: bool = False
    limit: int | None = None
    """At most this many files at the other end, each with its first link (what
    read_file names); None: every link. A kbindexd older than this field sends every
    link and no ``LinksReply.files``."""


class Why(Request, tag="why", frozen=True):
    path: str


class AddRoot(Request, tag="add_root", frozen=True):
    """Start indexing a directory now and list it in the config file."""

    path: str
    """Absolute (the daemon's working directory is not the client's)."""


class RemoveRoot(Request, tag="remove_root", frozen=True):
    """Stop indexing a root, forget its documents and drop it from the config file."""

    path: str


class RetireMachine(Request, tag="retire_machine", frozen=True):
    """Remove a machine that no daemon writes any more, and its rows, from a shared index:
    ``kbctl machines retire NAME``."""

    name: str


class Check(Request, tag="check", frozen=True):
    """Verify the index (``PRAGMA quick_check``) and report the WAL size: kbctl doctor."""


class Reload(Request, tag="reload", frozen=True):
    """Re-read the configuration, as SIGHUP does, and answer once it is in force (or
    refused): ``kbctl reload``, and the unit's ExecReload= where systemd has no
    ``Type=notify-reload``."""


AnyRequest = (
    Hello
    | Ping
    | Status
    | Search
    | Grep
    | WriteNote
    | EditNote
    | AppendNote
    | MoveNote
    | DeleteNote
    | NoteChanges
    | Refresh
    | ReadFile
    | FindFiles
    | Links
    | Why
    | AddRoot
    | RemoveRoot
    | Check
    | Reload
    | RetireMachine
)

REQUEST_OPS: Final = frozenset(str(cls.__struct_config__.tag) for cls in AnyRequest.__args__)


class Envelope(msgspec.Struct):
    """The two fields every request has, decoded first so that a request with a bad
    argument can still be answered with its own id."""

    op: str
    id: int = 0


# ---------------------------------------------------------------- replies


class Reply(msgspec.Struct, tag_field="type", kw_only=True, frozen=True):
    id: int = 0


class ErrorCode:
    """Stable error codes; clients branch on these, never on message text."""

    BAD_FRAME: Final = "bad_frame"
    FRAME_TOO_LARGE: Final = "frame_too_large"
    UNKNOWN_OP: Final = "unknown_op"
    INVALID_ARGUMENT: Final = "invalid_argument"
    BAD_QUERY: Final = "bad_query"
    BAD_FILTER: Final = "bad_filter"
    """A filter value (kind, tag, field, modified, date, scope, recent) that cannot be
    read; the message says what would be right."""
    BAD_PATTERN: Final = "bad_pattern"
    """A grep pattern the regex engine refuses (the message says where)."""
    UNAVAILABLE: Final = "unavailable"
    """A capability needs something this machine lacks (grep without ripgrep)."""
    NOT_FOUND: Final = "not_found"
    OUTSIDE_ROOTS: Final = "outside_roots"
    VERSION_MISMATCH: Final = "version_mismatch"
    PERMISSION_DENIED: Final = "permission_denied"
    SHUTTING_DOWN: Final = "shutting_down"
    BUSY: Final = "busy"
    """Every connection slot is taken by a connection with a request in flight."""
    CONFIG_ERROR: Final = "config_error"
    """The config file could not be read or written (``kbctl roots add|remove``), a
    reload was refused, or the daemon runs with no configuration in force."""
    INDEX_REBUILDING: Final = "index_rebuilding"
    """The index was found damaged and is being rebuilt from the files: retry shortly."""
    INDEX_UNWRITABLE: Final = "index_unwritable"
    """The index cannot be written (disk full): answers come from what it holds."""
    INTERNAL: Final = "internal"
    NOTE_CODES: Final = frozenset(
        ("EROFS", "EACCES", "ENOENT", "EEXIST", "EISDIR", "EINVAL", "EFBIG", "EILSEQ", "ECONFLICT")
    )
    """A note operation refused: POSIX names (and ``ECONFLICT``: ``if_match`` failed).
    Others from the system (``ENOSPC``, ``EXDEV``, ...) pass through by name."""


class ErrorReply(Reply, tag="error", frozen=True):
    code: str
    message: str


class HelloReply(Reply, tag="hello", frozen=True):
    version: int
    server: str
    capabilities: list[str] = []


class Pong(Reply, tag="pong", frozen=True):
    pass


class Progress(Reply, tag="progress", frozen=True):
    phase: str
    """``scanning`` (walking roots) or ``indexing`` (reading changed files)."""
    done: int = 0
    total: int = 0


class ReconcileReport(msgspec.Struct, kw_only=True):
    """What the last list+stat pass over a root found."""

    at: float
    seconds: float
    files_seen: int = 0
    changed: int = 0
    """Files read because they were new or their size or mtime changed."""
    removed: int = 0


class RootStatus(msgspec.Struct, kw_only=True):
    path: str
    state: str
    """``missing`` when the directory is gone; otherwise the watcher's state:
    ``live`` (inotify events), ``polling`` (configured), ``degraded`` (inotify failed,
    polling instead; ``detail`` says how to fix it), ``error``, ``off`` (watching turned
    off: changes wait for the periodic scan), or ``ok`` (no watcher)."""
    files: int = 0
    detail: str = ""
    last_scan_at: float | None = None
    watch: str = ""
    """The watcher's state alone (``state`` shows ``missing`` first)."""
    poll_seconds: float | None = None
    """Seconds between reconciles when polling."""
    last_event_at: float | None = None
    last_reconcile: ReconcileReport | None = None
    pending: int = 0
    writable: bool = False
    """Clients may write notes here (``[root."..."] writable = true``)."""
    warning: str = ""
    """Non-empty when the last scan's ignore rules skipped nearly everything in the
    root: how many, and the rule (with its file and line) that skipped the most."""
    scope: str = ""
    """Its name for the ``scope`` filter (``name`` in the configuration, else its
    folder's name; "" when another root's folder has the same name)."""
    description: str = ""
    """What it holds (``description`` in the configuration), as its hits' ``context``."""


class SemanticStatus(msgspec.Struct, kw_only=True):
    """Search by meaning: the model, and how far embedding has come."""

    state: str
    """``off`` (setting, or the extra not installed) | ``waiting`` (loads once the
    first scan is done) | ``loading`` | ``embedding`` | ``ready`` | ``unavailable``
    (the model failed to load: ``detail`` says why; searches use words) | ``failing``
    (the last pass failed, ``detail`` says why; it is tried again, and the vectors
    made so far serve searches)."""
    detail: str = ""
    model: str = ""
    files: int = 0
    """Files embedded."""
    passages: int = 0
    backlog: int = 0
    """Indexed files not embedded yet, a file indexed a moment ago included."""
    rate: float = 0.0
    """Passages the model embeds per second while it works, over the last minute (0:
    it did none in that minute, or it is starting)."""
    seconds_left: float | None = None
    """About how long the files to embed take (None until there is a rate)."""
    embedded: int = 0
    """Passages the model embedded since the daemon started (a passage whose text
    already had a vector costs nothing and is not counted)."""
    loaded_at: float | None = None
    """When the model was loaded (after the first scan, never before)."""
    size_mb: float = 0.0
    """The vector file on disk."""


class FileIssue(msgspec.Struct, kw_only=True):
    path: str
    reason: str


class ScanProgress(msgspec.Struct, kw_only=True):
    phase: str
    done: int
    total: int
    started_at: float


class LagReport(msgspec.Struct, kw_only=True):
    """Seconds from a file event to its change being searchable."""

    last_seconds: float | None = None
    max_seconds: float | None = None
    """The largest over ``window_seconds``."""
    window_seconds: float = 0.0
    samples: int = 0


class MachineCount(msgspec.Struct, kw_only=True):
    machine: str
    files: int
    state: str = ""
    """``live``, ``behind`` (its heartbeat is late) or ``gone`` (no daemon writes it)."""
    heartbeat_age: float | None = None
    """Seconds since its daemon's last heartbeat (None: never registered)."""


class BackendStatus(msgspec.Struct, kw_only=True):
    """The index's backend: ``sqlite`` (a file of this daemon's) or ``postgres`` (a
    database several daemons share)."""

    name: str
    server: str = ""
    """The database server and its version (postgres), never the credentials."""
    machine: str = ""
    """This daemon's machine name in a shared index."""
    machines: list[MachineCount] = []
    """Indexed files per machine in a shared index."""


class StatusReply(Reply, tag="status", frozen=True):
    version: str
    pid: int
    started_at: float
    indexed_files: int
    total_documents: int
    index_size_mb: float
    last_scan_at: float | None = None
    last_scan_seconds: float | None = None
    scanning: bool = False
    progress: ScanProgress | None = None
    skipped: dict[str, int] = {}
    """Files seen but not indexed, counted by reason (``binary``, ``too_large``, ...)."""
    errors_encountered: int = 0
    recent_errors: list[FileIssue] = []
    roots: list[RootStatus] = []
    state_dir: str = ""
    socket_path: str = ""
    index_recovered: str = ""
    """Non-empty when the index was found corrupt and rebuilt: what was kept aside."""
    index_rebuilding: str = ""
    """Non-empty while the index is rebuilt from the files (made by an older kbindexd,
    or damaged): why. Answers come from the old index as it was, or from the new one
    as it fills."""
    watch: str = ""
    """The worst watcher state over the roots (see RootStatus.state)."""
    pending: int = 0
    """Changed paths seen by the watcher and not indexed yet."""
    last_event_at: float | None = None
    lag: LagReport | None = None
    files_read: int = 0
    """Files read (and indexed or skipped) since the daemon started."""
    files_moved: int = 0
    """Files re-keyed by renames without being read again, since the daemon started."""
    index_error: str = ""
    """Non-empty while the index cannot be written (disk full, I/O error): changes wait
    and the daemon serves what the index already holds."""
    config_error: str = ""
    """Non-empty while the last reload (SIGHUP) was refused: why. The daemon runs on the
    configuration it had; cleared by the next reload that succeeds."""
    unconfigured: bool = False
    """True while no configuration is in force: the one the daemon was started with
    was refused (``config_error`` says why), and it indexes nothing, answering until a
    reload (or ``refresh``) finds the configuration fixed. Only under socket activation:
    elsewhere a bad configuration stops the daemon."""
    semantic: SemanticStatus | None = None
    backend: BackendStatus | None = None
    """Where the index lives (None from a daemon older than this field: SQLite)."""


class Freshness(msgspec.Struct, kw_only=True):
    """How current the answer is: attached to every search reply."""

    last_scan_at: float | None = None
    scanning: bool = False
    pending: int = 0
    watch: str = ""
    """``live`` when every root gets inotify events; else the worst root state."""
    lag_seconds: float | None = None
    """The largest event-to-searchable delay over the last few minutes."""
    index_error: str = ""
    """Non-empty while the index cannot be written: answers may be out of date."""
    rebuilding: str = ""
    """Non-empty while the index is rebuilt from the files (see
    ``StatusReply.index_rebuilding``): answers may be out of date or incomplete."""
    machines_behind: list[str] = []
    """In a shared index: machines whose daemon is alive but late (its heartbeat stopped
    coming: stalled, or cut off from the server): their files may have changed since."""
    machines_gone: list[str] = []
    """In a shared index: machines with rows and no daemon writing them (stopped, or
    gone for good: ``kbctl machines retire NAME`` removes their rows)."""


MATCH_OPEN: Final = "\u27e6"
MATCH_CLOSE: Final = "\u27e7"
"""``⟦`` and ``⟧`` (U+27E6, U+27E7) around each match in ``Hit.snippet``. Why not
``**``: a note's own Markdown bold looked like a match. A snippet holds these two
characters only as marks: where the text itself has them, it shows ``[`` and ``]``."""


class Hit(msgspec.Struct, kw_only=True):
    path: str
    root: str
    relpath: str
    score: float
    """Higher is better. By words: bm25. ``semantic``: the cosine similarity of the query
    and the passage shown (a match is at least the floor, 0.35). ``hybrid``: 0.7 times
    that similarity plus 0.3 times the bm25 relative to the best word hit's (0 to 1)."""
    snippet: str
    line: int
    size: int
    last_modified: float
    title: str = ""
    machine: str = ""
    """The machine whose disk holds the file, in an index several machines share."""
    page: int = 0
    """The page of a document's hit (kbindex[documents]), 0 for a file without pages;
    ``line`` is then the line of the whole extracted text (as read_file numbers it), and
    ``page_line`` the line within the page."""
    page_line: int = 0
    context: str = ""
    """The description of the file's root, where the configuration gives one."""


class SearchReply(Reply, tag="search", frozen=True):
    hits: list[Hit]
    total_hits: int
    truncated: bool
    mode: str = "all"
    freshness: Freshness | None = None
    notes: list[str] = []
    """What the client should know about this answer: search by meaning asked for but
    unavailable (answered by words), files not embedded yet, a path filter that matches
    no indexed file."""


class GrepLine(msgspec.Struct, kw_only=True, array_like=True):
    """One line of a file: a match, or context around one (``match`` false). Sent as a
    compact array: a reply holds up to a thousand of them."""

    path: str
    """Absolute."""
    line: int
    text: str
    """Without its line break; a line longer than GREP_LINE_CHARS is cut around its
    first match and marked with ``…`` where it was cut."""
    match: bool = True
    column: int = 0
    """1-based, in characters, of the first match (0 for context lines)."""
    page: int = 0
    """Of a document's page (0: a text of one page); ``line`` is within it."""
    extracted: bool = False
    """A line of a document's extracted text (a PDF, an Office file, an EPUB, a web
    page's readable text), not a line of the file's bytes."""


GREP_LINE_CHARS: Final = 300


class GrepReply(Reply, tag="grep", frozen=True):
    lines: list[GrepLine]
    """In path order, then line order: matches and their context, or with
    ``files_only`` one entry per file (``line`` 0, ``text`` empty)."""
    total: int
    """Matching lines (or files, with ``files_only``) counted; every one when
    ``complete``."""
    files: int = 0
    """Files with at least one match, counted."""
    truncated: bool = False
    """More matched than ``lines`` shows (``limit`` reached)."""
    complete: bool = True
    """False when the search stopped early (its deadline, or enough counted) and
    ``total`` is a lower bound."""
    candidates: int = 0
    """Files read: those the trigram index could not rule out, plus pending changes."""
    scanned_all: bool = False
    """The pattern has no literal the trigram index could use: every indexed file
    (within ``path``) was read."""
    freshness: Freshness | None = None
    notes: list[str] = []
    """As ``SearchReply.notes``: a path filter that matches no indexed file."""


class NoteReply(Reply, tag="note", frozen=True):
    """A note after a change: already searchable."""

    path: str
    hash: str
    """The content hash to pass as ``if_match`` next time ("" after a delete)."""
    lines: int
    size: int
    created: bool = False
    index_error: str = ""
    """Non-empty when the note was changed on disk but could not be indexed yet (a full
    disk): the daemon indexes it once it can. Do not repeat the change."""


class NoteChangesReply(Reply, tag="note_changes", frozen=True):
    cursor: int
    """Pass as ``since`` next time."""
    paths: list[str] = []
    """Absolute paths of the notes written, edited, moved (both ends) or deleted."""
    missed: bool = False
    """``since`` is older than what the daemon remembers (or from before a restart):
    any note may have changed."""


class RefreshReply(Reply, tag="refresh", frozen=True):
    queued: bool = False
    files_processed: int = 0
    files_changed: int = 0
    files_removed: int = 0
    errors: int = 0
    interrupted: bool = False
    """kbindexd began to stop before the refresh was done: what it wrote stays, and the
    rest is checked when it starts again."""


class ReadFileReply(Reply, tag="read_file", frozen=True):
    path: str
    text: str
    """The lines, each ``N| line`` (number right-aligned to the widest shown), joined by
    newlines; a first line longer than the size budget is cut and ends with ``…``."""
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool
    hash: str = ""
    """In a writable root: the file's content hash, for a note change's ``if_match``."""
    page: int = 0
    """The page asked for (``ReadFile.page``), else 0."""
    pages: int = 0
    """A document's pages (``ReadFile.page`` reads one); 0 for a text file."""


class FileInfo(msgspec.Struct, kw_only=True):
    path: str
    root: str
    relpath: str
    size: int
    last_modified: float
    machine: str = ""
    """As ``Hit.machine``."""
    note: bool = False
    """Written, edited or moved through the daemon's note requests since it started."""


class FindFilesReply(Reply, tag="find_files", frozen=True):
    files: list[FileInfo]
    total: int
    truncated: bool
    notes: list[str] = []
    """As ``SearchReply.notes``: a glob that matches no indexed file."""


class LinkInfo(msgspec.Struct, kw_only=True):
    source: str
    """The linking file (absolute)."""
    target: str
    """The file linked to (absolute); for a wikilink naming no file, the name as
    written under the root."""
    text: str
    line: int
    """Of the link in ``source``."""
    broken: bool = False
    """The target is neither in the index nor on disk."""
    wiki: bool = False


class LinksReply(Reply, tag="links", frozen=True):
    path: str
    links: list[LinkInfo]
    """In path order, then line order."""
    broken: int = 0
    """Of ``links``."""
    notes: list[str] = []
    files: int | None = None
    """How many files the links lead to (or, for backlinks, come from), each counted
    once, the ones ``Links.limit`` left out included; None from a kbindexd older than
    this field."""


class WhyReply(Reply, tag="why", frozen=True):
    path: str
    indexed: bool
    reason: str


class RootsReply(Reply, tag="roots", frozen=True):
    """The answer to AddRoot and RemoveRoot: the roots now indexed."""

    roots: list[RootStatus]
    message: str = ""
    config_path: str = ""
    """The file the change was written to, so that reloads and restarts keep it: the
    config file, or (roots given on the daemon's command line or in KBINDEX_ROOTS) the
    record of changed roots in its state directory."""


class ReloadReply(Reply, tag="reload", frozen=True):
    message: str
    """What the reload did (roots added and removed), or that the configuration now in
    force replaced a refused one."""


class CheckReply(Reply, tag="check", frozen=True):
    integrity: str
    """``ok``, or the first problem quick_check found."""
    db_bytes: int = 0
    wal_bytes: int = 0


class RetireReply(Reply, tag="retire_machine", frozen=True):
    message: str
    removed: int = 0
    """The machine's files removed from the index."""


AnyReply = (
    RetireReply
    | CheckReply
    | ReloadReply
    | ErrorReply
    | HelloReply
    | Pong
    | Progress
    | StatusReply
    | SearchReply
    | GrepReply
    | NoteReply
    | NoteChangesReply
    | RefreshReply
    | ReadFileReply
    | FindFilesReply
    | LinksReply
    | WhyReply
    | RootsReply
)
