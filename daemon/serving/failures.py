"""The daemon's own errors, and the error reply each known error becomes.

A request handler raises; ``server`` turns a known error into an ``ErrorReply`` with a
stable code (``proto.messages.ErrorCode``) and the exception's one sentence, and an
unknown one into ``internal`` with a log line. Note operations carry their POSIX-named
code themselves (``NoteError.code``).
"""

from __future__ import annotations

from typing import Final

from kbindex.daemon.config_file import ConfigError
from kbindex.daemon.grep import grepper as grep
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.index.interface import BadQuery, NotIndexed, TooSlow
from kbindex.daemon.notes.notefile import NoteError
from kbindex.daemon.recovery import IndexRebuilding
from kbindex.daemon.roots import InvalidPath, OutsideRoots
from kbindex.daemon.searching.filters import BadFilter
from kbindex.daemon.serving.control import BadRoot, ConfigRefused
from kbindex.proto.messages import ErrorCode, ErrorReply


class InvalidArgument(Exception):
    """A request's argument is out of range or inconsistent."""


class VersionMismatch(Exception):
    """The client speaks another protocol version."""


class IndexUnwritable(Exception):
    """A write to the index failed for want of space (or an I/O error)."""


class IndexUnavailable(Exception):
    """The index cannot be reached for now (its database server is down)."""


ERROR_CODES: Final[dict[type[Exception], str]] = {
    InvalidArgument: ErrorCode.INVALID_ARGUMENT,
    InvalidPath: ErrorCode.INVALID_ARGUMENT,
    BadFilter: ErrorCode.BAD_FILTER,  # before BadQuery, its base class
    BadQuery: ErrorCode.BAD_QUERY,
    OutsideRoots: ErrorCode.OUTSIDE_ROOTS,
    NotIndexed: ErrorCode.NOT_FOUND,
    VersionMismatch: ErrorCode.VERSION_MISMATCH,
    BadRoot: ErrorCode.INVALID_ARGUMENT,
    ConfigError: ErrorCode.CONFIG_ERROR,
    ConfigRefused: ErrorCode.CONFIG_ERROR,
    IndexRebuilding: ErrorCode.INDEX_REBUILDING,
    IndexUnwritable: ErrorCode.INDEX_UNWRITABLE,
    IndexUnavailable: ErrorCode.UNAVAILABLE,
    grep.BadPattern: ErrorCode.BAD_PATTERN,
    TooSlow: ErrorCode.BAD_QUERY,
    ripgrep.Unavailable: ErrorCode.UNAVAILABLE,
}


def error_reply(exc: Exception) -> ErrorReply | None:
    """The reply for a known error class, or None for an unexpected exception."""
    if isinstance(exc, NoteError):
        return ErrorReply(code=exc.code, message=str(exc))
    for cls, code in ERROR_CODES.items():
        if isinstance(exc, cls):
            return ErrorReply(code=code, message=str(exc))
    return None
