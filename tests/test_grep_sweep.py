"""A grep that every indexed file may answer (no trigram to narrow it): ripgrep walks
the roots and reads more than the index holds, and the answer is still exactly the
indexed files' one, as ``rg -uu`` prints it for them.

Real daemon, real files, real ripgrep; one case edits the index file to look as an
index written before NULs were marked (schema v8), which no running kbindexd can make.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Daemon, write
from grep_helpers import Case, grep, needs_rg
from kbindex.daemon.engine import sqlite
from kbindex.daemon.grep import grepper as grepping
from kbindex.daemon.grep import ripgrep, sweep
from kbindex.daemon.index.values import Candidates
from kbindex.daemon.indexing import grams
from kbindex.daemon.roots import Roots
from kbindex.proto.messages import Grep, GrepReply

pytestmark = [pytest.mark.slow, pytest.mark.anyio, needs_rg]

LATE_NUL = b"ab before\n" + b"filler line\n" * 8000 + b"x\0y\nab after\n"
"""A NUL past ripgrep's first 64 KiB: ``rg -uu`` prints the line before it, while its
``--count`` prints nothing for the file."""


async def _tree(d: Daemon) -> None:
    d.extra_args = ["--include-ext", "*"]
    d.stop()
    root = d.root
    write(root / "a.txt", "ab one\nno match\nab two\n")
    write(root / "late nul.txt", LATE_NUL)
    write(root / "sub" / "venv", "ab in a file named like an ignored directory\n")
    write(root / "sub" / "deeper" / "c.md", "one more ab\n")
    # Read by the walk, never indexed:
    write(root / ".kbignore", "left-out.txt\n")
    write(root / "left-out.txt", "ab, but ignored\n")
    write(root / "node_modules" / "m.txt", "ab in a built-in ignored directory\n")
    write(root / "sub" / "venv.d" / ".cache" / "x.txt", "ab in a cache\n")
    write(root / "photo.bin", b"\x89PNG\0\0ab\n")
    await d.start()


def _lines(d: Daemon, reply: GrepReply) -> list[tuple[str, int]]:
    return [(os.path.relpath(ln.path, d.root), ln.line) for ln in reply.lines]


async def test_a_grep_of_every_file_answers_from_the_indexed_files_alone(
    daemon: Daemon,
) -> None:
    await _tree(daemon)
    reply = await grep(daemon, Case("ab"))
    assert reply.scanned_all
    assert _lines(daemon, reply) == [
        ("a.txt", 1),
        ("a.txt", 3),
        ("late nul.txt", 1),
        ("sub/deeper/c.md", 1),
        ("sub/venv", 1),
    ]
    assert (reply.total, reply.files, reply.truncated, reply.complete) == (5, 4, False, True)

    # A limit: the first lines in path order, every match counted.
    reply = await grep(daemon, Case("ab"), limit=2)
    assert _lines(daemon, reply) == [("a.txt", 1), ("a.txt", 3)]
    assert (reply.total, reply.files, reply.truncated) == (5, 4, True)
    reply = await grep(daemon, Case("ab", files_only=True), limit=3)
    assert _lines(daemon, reply) == [("a.txt", 0), ("late nul.txt", 0), ("sub/deeper/c.md", 0)]
    assert (reply.total, reply.files, reply.truncated) == (4, 4, True)


async def test_a_path_filter_walks_its_directory_or_names_the_files_of_a_glob(
    daemon: Daemon,
) -> None:
    await _tree(daemon)
    async with daemon.client() as c:
        by_dir = await c.request(Grep(pattern="ab", path="sub"), GrepReply)
        by_glob = await c.request(Grep(pattern="ab", path="*.txt"), GrepReply)
        outside = await c.request(Grep(pattern="ab", path="/usr"), GrepReply)
    assert _lines(daemon, by_dir) == [("sub/deeper/c.md", 1), ("sub/venv", 1)]
    assert _lines(daemon, by_glob) == [("a.txt", 1), ("a.txt", 3), ("late nul.txt", 1)]
    assert (outside.total, outside.lines) == (0, [])


async def test_an_index_from_before_nuls_were_marked_is_built_again_and_finds_them(
    daemon: Daemon,
) -> None:
    await _tree(daemon)
    daemon.stop()
    conn = sqlite.connect(daemon.db_path)
    try:
        (rowid,) = conn.execute(
            "SELECT id FROM files WHERE path = ?", [str(daemon.root / "late nul.txt")]
        ).fetchone()
        text = LATE_NUL.decode().replace("\0", " ")
        conn.execute("DELETE FROM docs_grams WHERE rowid = ?", [rowid])
        conn.execute(
            "INSERT INTO docs_grams(rowid, grams) VALUES (?, ?)",
            [rowid, grams.of_text(text, "utf-8")],
        )
        conn.execute("PRAGMA user_version = 8")
        conn.commit()
    finally:
        conn.close()
    # Built again from the files by the first scan, which reads the file anew.
    await daemon.start()
    reply = await grep(daemon, Case("ab"))
    assert ("late nul.txt", 1) in _lines(daemon, reply)
    assert reply.total == 5


def test_a_walks_counts_are_read_row_by_row_across_blocks() -> None:
    # A name may hold a line break; a block may end inside a row.
    out = b"a.txt\x003\nodd\nname.md\x0012\nhalf/wa"
    rows, used = ripgrep.counts(out)
    assert rows == [("a.txt", 3), ("odd\nname.md", 12)]
    assert out[used:] == b"half/wa"
    rows, used = ripgrep.counts(b"caf\xe9.txt\x001\n")
    assert rows == [("caf\\xe9.txt", 1)]


async def test_a_walk_printing_more_than_a_runs_output_cap_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree of a million files prints tens of MB of counts; here the cap is lowered
    to a few rows (a million files cannot be made in a test): 300 files match."""
    root = tmp_path / "root"
    names = [f"d{i // 30:02d}/f{i:03d}.txt" for i in range(300)]
    for name in names:
        write(root / name, "ab\nab\n")
    monkeypatch.setattr(grepping, "CHUNK_OUTPUT_BYTES", 1000)
    found = Candidates.of({str(root / n): 6 for n in names}, scanned_all=True, uncounted=[])
    grepper = grepping.Grepper(Roots((root,)))
    outcome = await sweep.run(grepper, ripgrep.Flags("ab"), found, [str(root)], 3)
    assert (outcome.total, outcome.files, outcome.complete) == (600, 300, True)
    assert [(Path(ln.path).name, ln.line) for ln in outcome.lines] == [
        ("f000.txt", 1),
        ("f000.txt", 2),
        ("f001.txt", 1),
    ]
