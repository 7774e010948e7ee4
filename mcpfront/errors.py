"""Turning failures into one short, actionable sentence for the model.

A model reads tool errors as text and decides what to do next, so every message says
what went wrong in the user's terms and what to try; never a stack trace, never the
daemon's internal wording alone. Branches on stable error codes, never on message text.
A note refused carries a POSIX name (``EROFS: ...``) at the front, as a shell would show
it: models know those names, and a script reading the text can branch on them.
"""

from __future__ import annotations

import logging
from typing import Final

from kbindex.mcpfront.arguments import ArgumentError
from kbindex.mcpfront.backend import DaemonTimeout
from kbindex.proto.client import (
    ConnectionLost,
    DaemonError,
    DaemonUnavailable,
    RequestTooLarge,
    UntrustedDaemon,
)
from kbindex.proto.messages import ErrorCode

log = logging.getLogger(__name__)


_NOTE_HINTS: Final = {
    "EROFS": "; write under a folder get_index_stats marks writable, or ask the user",
    "EACCES": "; use a path inside a writable folder",
    "ENOENT": "; find_files lists the notes",
    "EEXIST": "; pass overwrite=true to replace it, or choose another name",
    "ECONFLICT": " (read_file), then retry with if_match set to its new hash",
}


def is_posix(code: str) -> bool:
    """A note refusal (``EROFS``, ``ECONFLICT``) or a system error passed on by its name
    (``ENOSPC``): never one of the protocol's own codes, which are lower case."""
    return code in ErrorCode.NOTE_CODES or (code.startswith("E") and code.isupper())


def describe(exc: BaseException, *, subject: str | None = None, changing: bool = False) -> str:
    """The sentence shown for ``exc``; ``subject`` is the path or query the call was about,
    ``changing`` whether the call changes a note (a lost connection then leaves it
    unknown whether the change was made)."""
    if isinstance(exc, ArgumentError):
        return str(exc)
    if isinstance(exc, RequestTooLarge):
        return (
            f"EFBIG: {exc}; write the note in parts (write_note with the first, then "
            "append_note with the rest)."
        )
    if isinstance(exc, ConnectionLost) and changing:
        return (
            "The connection to the kbindex daemon was lost while the change was on its way: "
            "it may or may not have been made; read the note (read_file) before retrying."
        )
    if isinstance(exc, UntrustedDaemon):
        return (
            f"kbindex refused to use its socket, which may be another user's: {exc} "
            "Tell the user; do not retry."
        )
    if isinstance(exc, DaemonUnavailable):
        return (
            f"The kbindex daemon is not running (nothing answers on {exc.socket_path}); "
            "ask the user to start it with `kbindexd FOLDER...` or "
            "`systemctl --user start kbindexd.socket`, then retry."
        )
    if isinstance(exc, ConnectionLost):
        return (
            "The connection to the kbindex daemon was lost (it may be restarting); "
            "retry in a few seconds."
        )
    if isinstance(exc, DaemonTimeout):
        return f"The kbindex daemon is busy and {exc}; retry in a moment."
    if isinstance(exc, DaemonError):
        return _daemon_error(exc, subject)
    log.error("unexpected failure", exc_info=exc)
    return (
        f"kbindex-mcp failed unexpectedly ({type(exc).__name__}); "
        "this is a bug, its details are in the kbindex-mcp log on stderr."
    )


def _daemon_error(exc: DaemonError, subject: str | None) -> str:
    what = repr(subject) if subject else "The path"
    detail = _clip(exc.message)
    if is_posix(exc.code):
        return f"{exc.code}: {detail}{_NOTE_HINTS.get(exc.code, '')}."
    match exc.code:
        case ErrorCode.OUTSIDE_ROOTS:
            return (
                f"{what} is outside the folders kbindex indexes; use a path from search or "
                "find_files results (get_index_stats lists the indexed folders)."
            )
        case ErrorCode.NOT_FOUND:
            # The daemon's message says why (does not exist, skipped as too large,
            # ignored by which rule): the model needs that to stop retrying.
            return f"kbindex: {detail}. Use find_files to look up the exact path of indexed files."
        case ErrorCode.BAD_QUERY:
            return (
                f"The search query could not be understood ({detail}); "
                "retry with plain words and no special characters."
            )
        case ErrorCode.BAD_FILTER:
            return (
                f"A filter of 'where' cannot be used ({detail}); fix that term and call"
                " again, or leave it out."
            )
        case ErrorCode.BAD_PATTERN:
            return (
                f"The grep pattern is not a valid regex ({detail}); fix it (ripgrep "
                "syntax), or send fixed_strings=true to search for it as written."
            )
        case ErrorCode.UNAVAILABLE:
            return (
                f"kbindex cannot do this on this machine ({detail}); use search "
                "instead, and tell the user."
            )
        case ErrorCode.INVALID_ARGUMENT:
            return f"The kbindex daemon rejected an argument: {detail}."
        case ErrorCode.PERMISSION_DENIED:
            return f"kbindex may not read {what} (permission denied: {detail})."
        case ErrorCode.INDEX_REBUILDING:
            return (
                "The kbindex index was found damaged and is being rebuilt from the files; "
                "retry in a few seconds (get_index_stats shows progress)."
            )
        case ErrorCode.INDEX_UNWRITABLE:
            return (
                f"kbindex cannot update its index right now ({detail}); searches still "
                "answer from what it holds. Tell the user to free disk space."
            )
        case ErrorCode.BUSY:
            return "The kbindex daemon has too many connections busy; retry in a moment."
        case ErrorCode.SHUTTING_DOWN:
            return (
                "The kbindex daemon is shutting down; retry in a few seconds once it has restarted."
            )
        case ErrorCode.VERSION_MISMATCH:
            return (
                "kbindex-mcp and the running kbindexd are incompatible versions; "
                f"ask the user to upgrade kbindex and restart the daemon ({detail})."
            )
        case _:
            return (
                f"The kbindex daemon failed on this request ({exc.code}: {detail}); "
                "retry, and if it persists check `kbctl status`."
            )


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text if len(text) <= limit else text[: limit - 1] + "…"
