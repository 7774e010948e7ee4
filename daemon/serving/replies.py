"""The daemon's state and answers as protocol messages: where the core meets the wire.

The indexer, the watcher and the reconciler record what happens in ``health`` types of
their own, and the searcher answers in its own types; status, search and listing replies
are built from them here, so a change to the protocol touches this module and
``service``, never the core.
"""

from __future__ import annotations

from kbindex.daemon.grep import grepper as grep
from kbindex.daemon.health import LAG_WINDOW_SECONDS, Health, Lag, Progress, Reconciled, RootHealth
from kbindex.daemon.index import values as index
from kbindex.daemon.notes import notes
from kbindex.proto.messages import (
    BackendStatus,
    FileInfo,
    FileIssue,
    Freshness,
    GrepLine,
    GrepReply,
    Hit,
    LagReport,
    LinkInfo,
    MachineCount,
    NoteReply,
    ReconcileReport,
    RootStatus,
    ScanProgress,
)


def progress(p: Progress | None) -> ScanProgress | None:
    if p is None:
        return None
    return ScanProgress(phase=p.phase, done=p.done, total=p.total, started_at=p.started_at)


def lag(value: Lag) -> LagReport:
    return LagReport(
        last_seconds=value.last_seconds,
        max_seconds=value.max_seconds,
        window_seconds=LAG_WINDOW_SECONDS,
        samples=value.samples,
    )


def problems(health: Health) -> list[FileIssue]:
    return [FileIssue(path=p.path, reason=p.reason) for p in health.recent_errors]


def freshness(health: Health, counts: index.Counts | None = None) -> Freshness:
    states = counts.machines if counts is not None else {}
    return Freshness(
        machines_behind=sorted(m for m, (state, _) in states.items() if state == "behind"),
        machines_gone=sorted(m for m, (state, _) in states.items() if state == "gone"),
        last_scan_at=health.last_scan_at,
        scanning=health.scanning,
        pending=health.pending,
        watch=health.watch_state(),
        lag_seconds=health.lag().max_seconds,
        index_error=health.index_error,
        rebuilding=health.rebuilding(),
    )


def _reconcile(r: Reconciled | None) -> ReconcileReport | None:
    if r is None:
        return None
    return ReconcileReport(
        at=r.at, seconds=r.seconds, files_seen=r.files_seen, changed=r.changed, removed=r.removed
    )


def root_status(
    path: str,
    rh: RootHealth,
    files: int,
    pending: int,
    *,
    writable: bool = False,
    scope: str = "",
    description: str = "",
) -> RootStatus:
    return RootStatus(
        path=path,
        state=rh.shown_state,
        detail=rh.shown_detail,
        files=files,
        last_scan_at=rh.last_scan_at,
        watch=rh.watch,
        poll_seconds=rh.poll_seconds,
        last_event_at=rh.last_event_at,
        last_reconcile=_reconcile(rh.last_reconcile),
        pending=pending,
        writable=writable,
        warning="" if rh.ignored is None else rh.ignored.warning,
        scope=scope,
        description=description,
    )


def file_info(f: index.File, note: bool = False) -> FileInfo:
    return FileInfo(
        path=f.path,
        root=f.root,
        relpath=f.relpath,
        size=f.size,
        last_modified=f.mtime_ns / 1e9,
        machine=f.machine,
        note=note,
    )


def link(x: index.Linked, *, broken: bool) -> LinkInfo:
    return LinkInfo(
        source=x.source, target=x.target, text=x.text, line=x.line, broken=broken, wiki=x.wiki
    )


def hit(h: index.Hit, page: tuple[int, int] = (0, 0), context: str = "") -> Hit:
    return Hit(
        path=h.path,
        root=h.root,
        relpath=h.relpath,
        score=h.score,
        snippet=h.snippet,
        line=h.line,
        size=h.size,
        last_modified=h.mtime_ns / 1e9,
        title=h.title,
        machine=h.machine,
        page=page[0],
        page_line=page[1],
        context=context,
    )


def backend(described: index.Described, counts: index.Counts) -> BackendStatus:
    return BackendStatus(
        name=described.name,
        server=described.server,
        machine=described.machine,
        machines=[
            MachineCount(
                machine=m,
                files=counts.per_machine.get(m, 0),
                state=counts.machines.get(m, ("", None))[0],
                heartbeat_age=counts.machines.get(m, ("", None))[1],
            )
            for m in sorted({*counts.per_machine, *counts.machines})
        ],
    )


def grep_reply(outcome: grep.Outcome, fresh: Freshness, notes: list[str]) -> GrepReply:
    return GrepReply(
        lines=[
            GrepLine(
                path=ln.path,
                line=ln.line,
                text=ln.text,
                match=ln.match,
                column=ln.column,
                page=ln.page,
                extracted=ln.extracted,
            )
            for ln in outcome.lines
        ],
        total=outcome.total,
        files=outcome.files,
        truncated=outcome.truncated,
        complete=outcome.complete,
        candidates=outcome.candidates,
        scanned_all=outcome.scanned_all,
        freshness=fresh,
        notes=notes,
    )


def note(written: notes.Written) -> NoteReply:
    return NoteReply(
        path=written.path,
        hash=written.hash,
        lines=written.lines,
        size=written.size,
        created=written.created,
        index_error=written.index_error,
    )
