"""A StatusReply as the user sees it: the names, times and wording both front ends share.

Both front ends show status with the same names, ISO times and wording (``ago``), so
it is written once. Why here: kbctl must not import the MCP front end (it pulls in the
MCP SDK), and both already import ``proto``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from kbindex.proto.messages import StatusReply

RECENT_ERRORS: Final = 10
REASON_CHARS: Final = 300


def iso(ts: float | None) -> str | None:
    """ISO 8601 UTC to the second (``2026-01-02T03:04:05Z``), or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(ts: float | None, now: float | None = None) -> str:
    """How long ago ``ts`` was, in the largest unit that keeps it readable."""
    if ts is None:
        return "never"
    seconds = max(0.0, (time.time() if now is None else now) - ts)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def status(reply: StatusReply, now: float | None = None) -> dict[str, Any]:
    """The user-facing form of ``reply``: no protocol fields, times in ISO 8601."""
    progress = reply.progress
    now = time.time() if now is None else now
    return {
        "indexed_files": reply.indexed_files,
        "total_documents": reply.total_documents,
        "index_size_mb": round(reply.index_size_mb, 2),
        "last_scan": iso(reply.last_scan_at),
        "last_scan_seconds": reply.last_scan_seconds,
        "scanning": reply.scanning,
        "scan_progress": (
            None
            if progress is None
            else {"phase": progress.phase, "done": progress.done, "total": progress.total}
        ),
        "watch": reply.watch,
        "pending_changes": reply.pending,
        "last_event": iso(reply.last_event_at),
        "errors_encountered": reply.errors_encountered,
        "recent_errors": [
            {"path": e.path, "reason": clip(e.reason, REASON_CHARS)}
            for e in reply.recent_errors[:RECENT_ERRORS]
        ],
        "skipped": dict(reply.skipped),
        "roots": [
            {
                "path": r.path,
                "state": r.state,
                "files": r.files,
                "detail": r.detail,
                "last_scan": iso(r.last_scan_at),
                "warning": r.warning,
                "writable": r.writable,
            }
            for r in reply.roots
        ],
        "daemon": {
            "version": reply.version,
            "pid": reply.pid,
            "uptime_seconds": round(max(0.0, now - reply.started_at), 1),
            "socket": reply.socket_path,
        },
        "index_recovered": reply.index_recovered,
        "index_error": reply.index_error,
        "config_error": reply.config_error,
        "unconfigured": reply.unconfigured,
        "semantic": None if reply.semantic is None else msgspec.to_builtins(reply.semantic),
    }
