"""The index is a hint, the roots are the rule: rows planted in the index never make the
daemon read a file outside its roots.

Anyone who may write a shared PostgreSQL database (or, for SQLite, the state directory)
can add rows naming any path. The planting here is what such a writer does: rows of
indexed files re-keyed to a secret file outside the roots, named directly, through
``..``, through a directory symlink in the root and as a file symlink in the root. grep
(by trigrams, over every file, by name), search snippets and read_file must never show
the secret; the real file beside them is still found. Search by meaning reads its
passages where snippets are read (``Index.records``), checked on a real index file.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from conftest import Backend, MakeDaemon, Store, note, reading, write
from grep_helpers import needs_rg
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Batch
from kbindex.daemon.indexing.textfile import RETRY_MTIME_NS
from kbindex.proto.client import DaemonError
from kbindex.proto.messages import Grep, GrepReply

pytestmark = pytest.mark.anyio

SECRET = "SECRET-CONTENT"
WORD = "zebracorn"


def _plant(backend: Backend, db: Path, moves: list[tuple[str, str, str, str]]) -> None:
    """Re-key rows (old path -> new path, root, relpath), as a writer of the index can;
    each is marked waiting to be read again, so that grep over every file names it."""
    if backend.name == "sqlite":
        conn = sqlite.connect(db, timeout=10)
        with conn:
            for old, path, root, relpath in moves:
                conn.execute(
                    "UPDATE files SET path = ?, root = ?, relpath = ?, mtime_ns = ? WHERE path = ?",
                    (path, root, relpath, RETRY_MTIME_NS, old),
                )
        conn.close()
        return
    with psycopg.connect(backend.dsn, autocommit=True) as pg:
        for old, path, root, relpath in moves:
            machine = backend.machine
            if relpath == "elsewhere":  # another machine's row naming a file on this disk
                machine, relpath = "elsewhere", "secret.md"
            pg.execute(
                "UPDATE kb_files SET machine = %s, path = %s, root = %s, relpath = %s,"
                " mtime_ns = %s WHERE path = %s",
                (machine, path, root, relpath, RETRY_MTIME_NS, old),
            )


@needs_rg
@pytest.mark.slow
@pytest.mark.backends
async def test_planted_rows_never_make_the_daemon_read_outside_its_roots(
    make_daemon: MakeDaemon, tmp_path: Path, backend: Backend
) -> None:
    root, hidden = tmp_path / "root", tmp_path / "hidden"
    secret = write(hidden / "secret.md", f"{WORD} {SECRET}\n")
    for i in range(7):  # 0-4 re-keyed, 5 another machine's (PostgreSQL), 6 untouched
        write(root / f"decoy{i}.md", f"{WORD} decoy {i}\n")
    (root / "link").symlink_to(hidden)
    (root / "filelink.md").symlink_to(secret)
    daemon = make_daemon(root)
    await daemon.start()
    planted = {
        str(secret): str(hidden),  # outside, its row's root the secret's folder
        f"{root}/../hidden/secret.md": str(root),  # climbs out
        f"{root}/link/secret.md": str(root),  # a directory symlink in the root
        f"{root}/filelink.md": str(root),  # a file symlink in the root
        f"{root}/": str(root),  # the root itself: ripgrep would walk it
    }
    moves = [
        (str(root / f"decoy{i}.md"), path, where, Path(path).name)
        for i, (path, where) in enumerate(planted.items())
    ]
    if backend.name == "postgres":
        moves.append((str(root / "decoy5.md"), str(secret), str(hidden), "elsewhere"))
    _plant(backend, daemon.db_path, moves)
    kept = {str(root / "decoy6.md")}
    if backend.name == "sqlite":
        kept.add(str(root / "decoy5.md"))

    async with daemon.client() as c:
        for pattern, path, files_only in [
            (WORD, None, False),  # candidates by trigrams
            (WORD, "*", False),  # a glob: every candidate named to ripgrep
            (".", None, False),  # no trigram: ripgrep walks the roots, the rest named
            (".", "*", False),
            (WORD, None, True),
        ]:
            request = Grep(pattern=pattern, path=path, files_only=files_only, limit=100)
            reply = await c.request(request, GrepReply)
            shown = {(g.path, g.text) for g in reply.lines}
            assert not any(SECRET in text for _, text in shown), (pattern, path, shown)
            assert {p for p, _ in shown} == kept, (pattern, path, shown)

        found = await c.search(WORD, limit=20)
        assert len(found.hits) == 7  # the rows are shown: the index holds them
        for hit in found.hits:
            assert SECRET not in hit.snippet, hit
        if backend.name == "postgres":
            # Another machine's hit shows the text its daemon indexed, never this disk's.
            (elsewhere,) = [h for h in found.hits if h.machine == "elsewhere"]
            assert elsewhere.snippet == f"⟦{WORD}⟧ decoy 5"

        for path in [*planted, str(secret)]:
            with pytest.raises(DaemonError) as refused:
                await c.read_file(path)
            assert SECRET not in refused.value.message
            assert refused.value.code in ("outside_roots", "not_found"), refused.value


def test_passages_to_embed_are_read_from_the_roots_only(tmp_path: Path) -> None:
    """What search by meaning embeds and shows (``Index.records``) of a row re-keyed to a
    file outside the roots is nothing; the file inside is read."""
    root, hidden = tmp_path / "root", tmp_path / "hidden"
    write(hidden / "secret.md", f"{WORD} {SECRET}\n")
    store = Store(tmp_path / "index.sqlite3", reading(root))
    store.open()
    try:
        store.apply(Batch([note("a.md", f"{WORD} inside\n", root), note("b.md", WORD, root)]))
        with store.reader() as conn:
            ids = dict(conn.execute("SELECT path, id FROM files").fetchall())
        store.writer.execute(
            "UPDATE files SET path = ?, root = ? WHERE path = ?",
            (str(hidden / "secret.md"), str(hidden), str(root / "b.md")),
        )
        bodies = {s.file.path: s.body for s in store.records(list(ids.values()))}
    finally:
        store.close()
    assert bodies == {str(root / "a.md"): f"{WORD} inside\n", str(hidden / "secret.md"): None}
