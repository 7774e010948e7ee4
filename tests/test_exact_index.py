"""The exact (unstemmed) index, ``docs_exact``, holds the words of every document ``docs``
holds, written in the same transaction: after rewrites, moves, deletes, a full disk, and
an upgrade from the layout that kept it in a second file.

Every state here is produced for real (a file that cannot grow, an index file written
by the older schema's own statements). Nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import note, reading, renaming
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import documents as tables
from kbindex.daemon.backends.sqlite import schema, searcher
from kbindex.daemon.backends.sqlite import store as store_module
from kbindex.daemon.backends.sqlite.database import legacy_exact_path
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import disk_bytes, sqlite
from kbindex.daemon.index.values import Batch, Move, SizeCaps
from kbindex.daemon.indexing import documents
from kbindex.daemon.indexing.textfile import RETRY_MTIME_NS
from kbindex.daemon.searching.query import to_plan


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "index.sqlite3"


@pytest.fixture
def store(db: Path, tmp_path: Path) -> Iterator[Store]:
    s = Store(db, reading(tmp_path))
    s.open()
    try:
        yield s
    finally:
        s.close()


def found(s: Store, query: str) -> list[str]:
    """Relative paths the searcher finds, as the daemon searches."""
    with s.reader() as conn:
        return [h.relpath for h in searcher.search(conn, to_plan(query, limit=10)).hits]


def prefix_hits(s: Store, expr: str) -> list[str]:
    """Relative paths a prefix query on the exact index finds (through a reader)."""
    with s.reader() as conn:
        rows = conn.execute(
            "SELECT f.relpath FROM docs_exact d JOIN files f ON f.id = d.rowid"
            " WHERE docs_exact MATCH ? ORDER BY f.relpath",
            (expr,),
        ).fetchall()
    return [r for (r,) in rows]


def assert_in_step(s: Store) -> None:
    """The same documents in both tables, both sound."""
    conn = s.writer
    for table in ("docs", "docs_exact"):
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    in_exact = {r for (r,) in conn.execute("SELECT rowid FROM docs_exact")}
    assert in_exact == {r for (r,) in conn.execute("SELECT rowid FROM docs")}


def test_serves_prefixes_that_stems_miss(store: Store, db: Path) -> None:
    store.apply(Batch([note("a.md", "deprecation notice"), note("b.md", "deprecated api")]))
    assert not legacy_exact_path(db).exists()
    # Stemmed, both are "deprec": only the unstemmed index finds them by "deprecat*".
    assert prefix_hits(store, "deprecat*") == ["a.md", "b.md"]
    with store.reader() as conn:
        assert (
            conn.execute("SELECT count(*) FROM docs WHERE docs MATCH 'deprecat*'").fetchone()[0]
            == 0
        )
    assert_in_step(store)


def test_a_full_file_leaves_both_tables_as_they_were(store: Store) -> None:
    """The file cannot grow (max_page_count: SQLITE_FULL, as on a full disk) in the
    middle of a batch: neither table keeps any of it, and writes work again once there
    is room."""
    store.apply(Batch([note("small.md", "smallish")]))
    conn = store.writer
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    big = [note(f"big{i}.md", f"bigword{i} " + "filler text " * 5000) for i in range(20)]
    with pytest.raises(sqlite.OperationalError, match="full"):
        store.apply(Batch(big))
    assert prefix_hits(store, "bigword*") == []
    assert_in_step(store)
    conn.execute("PRAGMA max_page_count = 1073741823")
    store.apply(Batch(big))
    assert len(prefix_hits(store, "bigword*")) == 20
    assert_in_step(store)


def test_the_index_size_counts_the_file_and_its_log(store: Store, db: Path) -> None:
    """``kbctl status`` and ``doctor`` report the index's bytes on disk: the file and
    its write-ahead log."""
    store.apply(Batch([note("a.md", "sizeable " * 2000)]))
    on_disk = [Path(f"{db}{s}").stat().st_size for s in ("", "-wal")]
    assert all(on_disk) and sum(disk_bytes(db)) == store.size_bytes() == sum(on_disk)
    assert disk_bytes(db) == (on_disk[0], on_disk[1])


def test_an_index_with_the_exact_file_beside_it_is_built_again(db: Path) -> None:
    """Schema v4 kept docs_exact in ``index-exact.sqlite3``: that file is deleted, and the
    index (too old for today's reads) is built again beside the old one, which then
    takes its place."""
    db.parent.mkdir(parents=True)
    conn = sqlite.connect(db)
    conn.executescript(
        # What version 4 wrote, as far as matters here: its tables are not read.
        "CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);"
        "INSERT INTO files(path) VALUES ('/r/a.md');"
        "PRAGMA user_version = 4;"
    )
    conn.close()
    legacy = legacy_exact_path(db)
    for suffix in ("", "-wal"):
        Path(f"{legacy}{suffix}").write_bytes(b"")
    s = Store(db)
    assert s.open().state == "afresh"
    try:
        assert not legacy.exists() and not Path(f"{legacy}-wal").exists()
        assert s.writer.execute("SELECT count(*) FROM files").fetchone() == (0,)
        s.apply(Batch([note("a.md", "deprecation notice")]))
        assert found(s, "deprecat*") == ["a.md"]
        s.built()
        assert not s.beside.exists() and not s.rebuilding
        assert found(s, "deprecat*") == ["a.md"]
        assert_in_step(s)
    finally:
        s.close()


def _words(texts: list[str]) -> set[str]:
    """The words unicode61 (as the exact index configures it) finds in ``texts``."""
    conn = sqlite.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{schema.EXACT_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    conn.executemany("INSERT INTO t(x) VALUES (?)", [(t,) for t in texts])
    return {w for (w,) in conn.execute("SELECT term FROM v")}


# Words, identifiers, accents, CJK, punctuation and separators unicode61 knows.
_PIECES = st.sampled_from(
    ["parseHttpRequest", "max_file-size", "Café", "naïve_Parser", "東京都", "don’t", "a.b/c",
     "x\u00a0y", "İstanbul", "ﬁle", "e\u0301", "--flag", "v2.0", "😀", "\t", "\n", " ", "Ω"]
)  # fmt: skip


@pytest.mark.slow
@given(st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=30), st.text(max_size=10))
@settings(max_examples=300, deadline=None)
def test_the_exact_words_are_the_words_of_the_whole_text(pieces: list[str], name: str) -> None:
    body = "".join(pieces)
    values, words = documents.row_and_words(name, "", body)
    _, _, stored_body, subwords, grams = values
    whole = "\n".join((name, stored_body, subwords, grams))
    assert _words([words]) == _words([whole])


def test_a_rewritten_or_deleted_document_takes_its_old_words_out(
    store: Store, tmp_path: Path
) -> None:
    def vocabulary() -> dict[str, int]:
        return dict(store.writer.execute(f"SELECT term, doc FROM {schema.VOCABULARY}"))

    r = tmp_path / "r"
    store.apply(Batch([note("a.md", "alpha beta, beta", r), note("b.md", "beta gamma", r)]))
    assert vocabulary() == {"a": 1, "alpha": 1, "b": 1, "beta": 2, "gamma": 1, "md": 2}
    store.apply(Batch([note("a.md", "delta", r)]))
    assert vocabulary() == {"a": 1, "b": 1, "beta": 1, "delta": 1, "gamma": 1, "md": 2}
    (r / "b.md").rename(r / "c.md")
    store.apply(Batch(moves=[Move(f"{r}/b.md", f"{r}/c.md", str(r))], renamer=renaming(r)))
    assert vocabulary() == {"a": 1, "beta": 1, "c": 1, "delta": 1, "gamma": 1, "md": 2}
    store.apply(Batch(deletes=[f"{r}/a.md", f"{r}/c.md"]))
    assert vocabulary() == {}
    assert_in_step(store)


def test_a_moved_directory_is_indexed_again_from_its_files(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index keeps no text: a move reads each file at its new path, a few at a
    time (two here), and a file it cannot read loses its document and is marked so that
    the next scan reads it (its recorded mtime matches no file)."""
    monkeypatch.setattr(store_module, "MOVED_PER_STATEMENT", 2)
    r = tmp_path / "r"
    store.apply(Batch([note(f"old/n{i}.md", f"movedword{i} text", r) for i in range(5)]))
    ids = dict(store.writer.execute("SELECT relpath, id FROM files"))
    (r / "old").rename(r / "new")
    (r / "new" / "n4.md").unlink()  # gone again before the move is written
    assert (
        store.apply(Batch(moves=[Move(f"{r}/old", f"{r}/new", str(r))], renamer=renaming(r))) == 5
    )
    assert dict(store.writer.execute("SELECT relpath, id FROM files")) == {
        f"new/n{i}.md": ids[f"old/n{i}.md"] for i in range(5)
    }
    for i in range(4):
        assert found(store, f"movedword{i}") == [f"new/n{i}.md"]
        assert found(store, f"new n{i}") == [f"new/n{i}.md"]  # the new name's words
    assert found(store, "movedword4") == [] and found(store, "old") == []
    stamps = {p: mtime for p, _, mtime, *_ in store.known(None, SizeCaps.one(1 << 20))}
    assert stamps[f"{r}/new/n4.md"] == RETRY_MTIME_NS
    assert stamps[f"{r}/new/n0.md"] == 1
    for table in (*tables.TABLES, "titles"):
        held = {i for (i,) in store.writer.execute(f"SELECT rowid FROM {table}")}
        assert held == {ids[f"old/n{i}.md"] for i in range(4)}, table
    assert_in_step(store)


def test_a_batch_with_a_move_and_writes_is_written_all_or_nothing(
    store: Store, tmp_path: Path
) -> None:
    """A move and the files read with it go to the index in one ``Batch``: when the
    move fails half-way (the renamer raises on its second file), neither the moved
    rows nor the new file are written."""
    r = tmp_path / "r"
    store.apply(Batch([note(f"old/n{i}.md", f"movedword{i} text", r) for i in range(2)]))
    (r / "old").rename(r / "new")
    renamer = renaming(r)
    calls: list[str] = []

    class Failing:
        kind = renamer.kind
        restored = renamer.restored

        def read(self, path: str, relpath: str, size: int) -> object:
            calls.append(relpath)
            if len(calls) == 2:
                raise OSError("the disk went away")
            return renamer.read(path, relpath, size)

    batch = Batch(
        [note("fresh.md", "freshword", r)],
        moves=[Move(f"{r}/old", f"{r}/new", str(r))],
        renamer=Failing(),  # type: ignore[arg-type]
    )
    with pytest.raises(OSError, match="went away"):
        store.apply(batch)
    assert len(calls) == 2
    assert sorted(p for (p,) in store.writer.execute("SELECT relpath FROM files")) == [
        "old/n0.md",
        "old/n1.md",
    ]
    assert found(store, "freshword") == [] and found(store, "movedword0") == ["old/n0.md"]
    assert_in_step(store)
