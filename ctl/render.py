"""How kbctl shows daemon replies to a person (the --json forms bypass this).

What the daemon sends holds text from files and their names, which anyone who can
write a file in a root chose: an escape sequence in it would act on the terminal (set
its title, clear it, rewrite what is shown). So when kbctl writes to a terminal, every
string of a reply goes through ``terminal`` first, in one place: ``TerminalClient``,
the client kbctl then talks through (and ``main`` for error messages). Piped, the
bytes are left as they are: ``kbctl grep | ...`` prints what ``rg`` prints.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any, Final, TextIO, TypeVar

import msgspec
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.messages import (
    MATCH_CLOSE,
    MATCH_OPEN,
    FindFilesReply,
    Progress,
    ReadFileReply,
    Reply,
    Request,
    SearchReply,
    SemanticStatus,
    StatusReply,
)
from kbindex.proto.report import ago

BOLD = "\x1b[1m"
RESET = "\x1b[0m"

R = TypeVar("R", bound=Reply)

_BIDI: Final = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""The bidirectional embeddings, overrides and isolates ("Trojan Source",
CVE-2021-42574): they reorder how the rest of a line is drawn, so a name or a line
could show other than it reads. Text in right-to-left scripts displays without them."""
_ESCAPES: Final = {
    **{c: f"\\x{c:02x}" for c in range(0x20) if c != 0x09},  # C0; a tab is only space
    0x0A: "\\n",
    0x0D: "\\r",
    0x7F: "\\x7f",
    **{c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), *_BIDI)},  # C1, as \u: \xNN is a byte
}
_ONE_LINE: Final = str.maketrans(_ESCAPES)
_JSON: Final = str.maketrans({c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), *_BIDI)})
_LINES: Final = str.maketrans({c: e for c, e in _ESCAPES.items() if c != 0x0A})


def terminal(text: str, *, lines: bool = False) -> str:
    """``text`` safe to write to a terminal: control characters (C0 but the tab, DEL,
    C1) and bidirectional controls shown as escapes (``\\x1b``, ``\\u202e``), as ``ls``
    and ``git`` quote them. ``lines``: a file's text, whose line breaks stay (CR LF as
    LF: a terminal shows them alike). Backslashes are not doubled: the escapes are for
    reading, and the text itself is one ``--json`` away."""
    if lines:
        text = text.replace("\r\n", "\n")
    return text.translate(_LINES if lines else _ONE_LINE)


def for_terminal(reply: R) -> R:
    """``reply`` with every string in it passed through ``terminal`` (a file's text,
    ``ReadFileReply.text``, keeping its lines)."""
    shown = msgspec.convert(_escaped(msgspec.to_builtins(reply)), type(reply))
    if isinstance(shown, ReadFileReply) and isinstance(reply, ReadFileReply):
        shown = msgspec.structs.replace(shown, text=terminal(reply.text, lines=True))
    return shown


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return terminal(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    return value


class TerminalClient(BlockingClient):
    """The client kbctl talks through when its output is a terminal: every reply comes
    back with its strings made safe to show (``for_terminal``)."""

    def stream(self, request: Request, expect: type[R]) -> Iterator[R | Progress]:
        for reply in super().stream(request, expect):
            yield for_terminal(reply)


def emit_json(value: Any) -> None:
    """``value`` as one line of JSON on stdout, without the protocol's own fields (the
    request id and the reply's type tag), which say nothing about the answer. JSON
    escapes C0 itself; on a terminal DEL, C1 and bidirectional controls are written as
    ``\\u`` escapes too, which decode to the same strings."""
    data = msgspec.to_builtins(value)
    if isinstance(data, dict):
        data.pop("id", None)
        data.pop("type", None)
    text = msgspec.json.encode(data).decode()
    if sys.stdout.isatty():
        text = text.translate(_JSON)
    sys.stdout.write(text + "\n")


def shown(text: str, stream: TextIO) -> str:
    """``text`` as it may be written to ``stream``: through ``terminal`` when that is
    a terminal (kbctl's own messages quoting the daemon's)."""
    return terminal(text) if stream.isatty() else text


def status(reply: StatusReply) -> str:
    uptime = ago(reply.started_at).removesuffix(" ago")
    lines = [f"kbindexd {reply.version} (pid {reply.pid}), up {uptime}"]
    if reply.unconfigured:
        lines.append(f"CONFIGURATION REFUSED, nothing is indexed: {reply.config_error}")
        lines.append("fix it, then run: systemctl --user reload kbindexd (or kbctl reload)")
        lines.append(f"socket: {reply.socket_path}")
        return "\n".join(lines)
    scan = f"last full scan {ago(reply.last_scan_at)}"
    if reply.last_scan_seconds is not None:
        scan += f" (took {reply.last_scan_seconds:.2f} s)"
    lines.append(f"index: {reply.indexed_files:,} files, {reply.index_size_mb:,.1f} MB, {scan}")
    if reply.backend is not None and reply.backend.name != "sqlite":
        b = reply.backend
        lines.append(f"backend: {b.name}, {b.server}, this machine {b.machine!r}")
        counted = ", ".join(
            f"{m.machine} {m.files:,}" + (f" ({m.state})" if m.state not in ("", "live") else "")
            for m in b.machines
        )
        lines.append(f"machines: {counted or 'none yet'}")
    if reply.progress is not None:
        p = reply.progress
        lines.append(f"busy: {p.phase} {p.done:,}/{p.total:,}")
    else:
        lines.append("busy: no (idle)")
    if reply.watch:
        live = f"watching: {reply.watch}, {reply.pending:,} change(s) pending"
        live += f", last event {ago(reply.last_event_at)}"
        if reply.lag is not None and reply.lag.last_seconds is not None:
            live += f", change-to-searchable {reply.lag.last_seconds * 1000:,.0f} ms"
            if reply.lag.max_seconds is not None:
                live += f" (max {reply.lag.max_seconds * 1000:,.0f} ms"
                live += f" in {reply.lag.window_seconds / 60:.0f} min)"
        lines.append(live)
    if reply.skipped:
        parts = ", ".join(f"{reason} {n:,}" for reason, n in sorted(reply.skipped.items()))
        lines.append(f"skipped: {parts}")
    lines.append(f"errors since start: {reply.errors_encountered:,}")
    for issue in reply.recent_errors[:5]:
        lines.append(f"  {issue.path}: {issue.reason}")
    if reply.index_recovered:
        lines.append(f"index was rebuilt: {reply.index_recovered}")
    if reply.index_rebuilding:
        lines.append(
            f"index being rebuilt from the files, answers may be out of date:"
            f" {reply.index_rebuilding}"
        )
    if reply.index_error:
        lines.append(f"INDEX NOT WRITABLE, answers may be out of date: {reply.index_error}")
    if reply.config_error:
        lines.append(f"CONFIG RELOAD REFUSED, running on the previous one: {reply.config_error}")
    if reply.semantic is not None:
        lines.append(_meaning(reply.semantic))
    if not reply.roots:
        lines.append("no roots: add one with kbctl roots add PATH")
    else:
        lines.append("roots:")
    for root in reply.roots:
        detail = f"  ({root.detail})" if root.detail else ""
        writable = "  writable" if root.writable else ""
        lines.append(f"  {root.path}  {root.state}  {root.files:,} files{writable}{detail}")
        if root.warning:
            lines.append(f"    WARNING: {root.warning}")
    lines.append(f"socket: {reply.socket_path}")
    lines.append(f"state:  {reply.state_dir}")
    return "\n".join(lines)


def _meaning(s: SemanticStatus) -> str:
    if s.state == "waiting":
        return "meaning: waiting (the model loads after the first scan)"
    if s.state == "loading":
        return "meaning: loading the model"
    line = f"meaning: {s.state}"
    if s.state in ("embedding", "ready", "failing"):
        line += f", {s.model}, {s.files:,} files / {s.passages:,} passages, {s.size_mb:,.1f} MB"
    if s.backlog and s.rate:
        line += f", {s.backlog:,} file(s) to embed at {s.rate:,.1f} passages/s"
        if s.seconds_left is not None:
            line += f", about {_duration(s.seconds_left)} left"
    elif s.backlog:
        line += f", {s.backlog:,} file(s) to embed, starting"
    return line + (f" ({s.detail})" if s.detail else "")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def search(reply: SearchReply, *, color: bool) -> str:
    """``color``: matches in bold (unless NO_COLOR is set), else marked ``⟦ ⟧``."""
    notes = [f"note: {n}" for n in reply.notes]
    if not reply.hits:
        return "\n".join(["no matches", *notes])
    bold = color and not os.environ.get("NO_COLOR")
    out: list[str] = []
    for hit in reply.hits:
        snippet = hit.snippet
        if bold:
            snippet = snippet.replace(MATCH_OPEN, BOLD).replace(MATCH_CLOSE, RESET)
        where = f"{hit.machine}:{hit.path}" if hit.machine else hit.path
        page = f"  (p. {hit.page}, line {hit.page_line})" if hit.page else ""
        # A root's or folder's description (``context``) says what the hit is part of.
        context = f"  — {hit.context}" if hit.context else ""
        out.append(f"{where}:{hit.line}{page}  ({hit.score:.2f}){context}")
        out.append(f"    {snippet}")
    shown = len(reply.hits)
    more = f", showing {shown}" if reply.truncated else ""
    out.append(f"{reply.total_hits:,} match{'es' if reply.total_hits != 1 else ''}{more}")
    out += notes
    return "\n".join(out)


def files(reply: FindFilesReply) -> str:
    rows = [
        f"{f.machine + ':' if f.machine else ''}{f.path}  {f.size:,} B  {ago(f.last_modified)}"
        + ("  (note)" if f.note else "")
        for f in reply.files
    ]
    if reply.truncated:
        rows.append(f"... {reply.total - len(reply.files):,} more")
    return "\n".join(rows) if rows else "no files"


def notes(found: list[str]) -> None:
    """A reply's notes on stderr, after its lines: stdout stays a list of lines a pipe
    reads (``files``, ``grep``)."""
    if found:
        sys.stdout.flush()
        for note in found:
            print(f"kbctl: note: {note}", file=sys.stderr)


class ProgressBar:
    """A one-line progress bar on stderr when it is a terminal, sparse lines otherwise."""

    WIDTH = 30

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_phase = ""

    def update(self, progress: Progress) -> None:
        total = max(progress.total, 1)
        if self.tty:
            filled = int(self.WIDTH * progress.done / total) if progress.total else 0
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self.stream.write(f"\r{progress.phase:<9} [{bar}] {progress.done:,}/{progress.total:,}")
            self.stream.flush()
        elif progress.phase != self.last_phase or progress.done == progress.total:
            self.stream.write(f"{progress.phase}: {progress.done:,}/{progress.total:,}\n")
        self.last_phase = progress.phase

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
