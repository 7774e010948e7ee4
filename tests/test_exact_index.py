"""The exact (unstemmed) index lives in a file of its own and must always hold what the
main file holds: after a crash between the two commits, a failed commit, a lost file.

Every state here is produced for real: files copied back from before a write (what a
crash between the two commits leaves), a COMMIT that SQLite itself refuses, a main
file that is full. Nothing is mocked.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import note
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon import documents, exactindex, searcher
from kbindex.daemon.query import compile_query
from kbindex.daemon.store import Store, disk_bytes


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "index.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    s = Store(db)
    s.open()
    try:
        yield s
    finally:
        s.close()


def found(s: Store, query: str) -> list[str]:
    """Relative paths the searcher finds, as the daemon searches."""
    with s.reader() as conn:
        return [h.relpath for h in searcher.search(conn, compile_query(query), 10, None).hits]


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
    """Same counter, same documents, both indexes sound."""
    exact = s.exact.conn
    assert exactindex.writes(exact) == exactindex.writes(s.writer)
    exact.execute("INSERT INTO docs_exact(docs_exact) VALUES ('integrity-check')")
    in_exact = {r for (r,) in exact.execute("SELECT rowid FROM docs_exact")}
    assert in_exact == {r for (r,) in s.writer.execute("SELECT rowid FROM docs")}


def test_lives_beside_the_main_file_and_serves_prefixes(store: Store, db: Path) -> None:
    store.apply([note("a.md", "deprecation notice"), note("b.md", "deprecated api")], [])
    assert exactindex.path_for(db).exists()
    # Stemmed, both are "deprec": only the unstemmed index finds them by "deprecat*".
    assert prefix_hits(store, "deprecat*") == ["a.md", "b.md"]
    with store.reader() as conn:
        assert (
            conn.execute("SELECT count(*) FROM docs WHERE docs MATCH 'deprecat*'").fetchone()[0]
            == 0
        )
    assert_in_step(store)


def test_a_lost_exact_file_is_rebuilt_from_the_stored_text(db: Path) -> None:
    s = Store(db)
    s.open()
    s.apply([note("a.md", "alphabetical order, deprecation notice")], [])
    s.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{exactindex.path_for(db)}{suffix}").unlink(missing_ok=True)
    s = Store(db)
    s.open()  # does not wait for the rebuild: the daemon serves at once
    try:
        assert s.exact.stale and not s.exact.usable
        # Meanwhile a prefix is FTS5's own prefix of stems: approximate, no error.
        assert found(s, "alphabet*") == ["a.md"]
        assert found(s, "deprecat*") == []  # "deprecation" is indexed as "deprec"
        assert s.repair_exact()
        assert prefix_hits(s, "alphabet*") == ["a.md"]
        assert found(s, "deprecat*") == ["a.md"]
        assert_in_step(s)
    finally:
        s.close()


def test_a_crash_between_the_two_commits_is_repaired_at_start(db: Path, tmp_path: Path) -> None:
    """The exact file commits first: a crash before the main commit leaves it a write
    ahead, holding a document the main file never got. Produced here by putting back
    the main file as it was before that write."""
    s = Store(db)
    s.open()
    s.apply([note("kept.md", "keepsake")], [])
    s.close()  # checkpointed: the main file alone holds everything
    before = tmp_path / "main-before.sqlite3"
    shutil.copyfile(db, before)
    s = Store(db)
    s.open()
    s.apply([note("lost.md", "lostword")], [])
    s.close()
    shutil.copyfile(before, db)  # the main commit of that write never happened
    s = Store(db)
    s.open()
    try:
        assert s.exact.stale and s.exact.usable  # readable, a write ahead
        assert s.repair_exact()
        assert prefix_hits(s, "lostw*") == []  # no phantom document
        assert prefix_hits(s, "keeps*") == ["kept.md"]
        assert_in_step(s)
    finally:
        s.close()


def test_a_main_commit_that_fails_after_the_exact_one_is_repaired(store: Store) -> None:
    """SQLite refuses the main COMMIT (a deferred foreign key left violated by a
    trigger this test adds) after the exact index has committed: the store marks the
    exact index stale and rebuilds it before the next write."""
    conn = store.writer
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(
        """
        CREATE TABLE refusal(id INTEGER REFERENCES nowhere(id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TABLE nowhere(id INTEGER PRIMARY KEY);
        CREATE TRIGGER refuse AFTER INSERT ON files WHEN NEW.relpath = 'refused.md'
        BEGIN INSERT INTO refusal VALUES (1); END;
        """
    )
    store.apply([note("first.md", "firstling")], [])
    # A pooled reader now has the file attached that the rebuild below replaces.
    assert prefix_hits(store, "firstl*") == ["first.md"]
    with pytest.raises(sqlite3.IntegrityError):
        store.apply([note("refused.md", "refusenik")], [])
    assert store.exact.stale  # it committed the document the main file refused
    store.apply([note("second.md", "secondment")], [])
    assert not store.exact.stale
    assert prefix_hits(store, "refusen*") == []
    assert prefix_hits(store, "firstl* OR secondm*") == ["first.md", "second.md"]
    assert_in_step(store)


def test_a_full_main_file_leaves_both_as_they_were(store: Store) -> None:
    """The main file cannot grow (max_page_count: SQLITE_FULL, as on a full disk) in
    the middle of a batch: neither file keeps any of it, and writes work again once
    there is room."""
    store.apply([note("small.md", "smallish")], [])
    conn = store.writer
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    big = [note(f"big{i}.md", f"bigword{i} " + "filler text " * 5000) for i in range(20)]
    with pytest.raises(sqlite3.OperationalError, match="full"):
        store.apply(big, [])
    assert prefix_hits(store, "bigword*") == []
    assert_in_step(store)
    conn.execute("PRAGMA max_page_count = 1073741823")
    store.apply(big, [])
    assert len(prefix_hits(store, "bigword*")) == 20
    assert_in_step(store)


def test_the_index_size_counts_both_files_and_their_logs(store: Store, db: Path) -> None:
    """``kbctl status`` and ``doctor`` report the index's bytes on disk: the main file,
    the exact file beside it, and each one's write-ahead log."""
    store.apply([note("a.md", "sizeable " * 2000)], [])
    files = [db, exactindex.path_for(db)]
    on_disk = [Path(f"{f}{s}").stat().st_size for f in files for s in ("", "-wal")]
    assert all(on_disk) and sum(disk_bytes(db)) == store.size_bytes() == sum(on_disk)
    assert disk_bytes(db) == (on_disk[0] + on_disk[2], on_disk[1] + on_disk[3])


def _words(texts: list[str]) -> set[str]:
    """The words unicode61 (as the exact index configures it) finds in ``texts``."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{exactindex.TOKENIZER}')")
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
    # What an insertion gives the index is what a removal recomputes from the row.
    assert words == documents.exact_text(values)
    _, _, stored_body, subwords, grams = values
    whole = "\n".join((name, stored_body, subwords, grams))
    assert _words([words]) == _words([whole])


def test_a_rewritten_or_deleted_document_takes_its_old_words_out(store: Store) -> None:
    def vocabulary() -> dict[str, int]:
        return dict(store.exact.conn.execute(f"SELECT term, doc FROM {exactindex.VOCABULARY}"))

    store.apply([note("a.md", "alpha beta, beta"), note("b.md", "beta gamma")], [])
    assert vocabulary() == {"a": 1, "alpha": 1, "b": 1, "beta": 2, "gamma": 1, "md": 2}
    store.apply([note("a.md", "delta")], [])
    assert vocabulary() == {"a": 1, "b": 1, "beta": 1, "delta": 1, "gamma": 1, "md": 2}
    store.move("/r/b.md", "/r/c.md", "/r")
    assert vocabulary() == {"a": 1, "beta": 1, "c": 1, "delta": 1, "gamma": 1, "md": 2}
    store.apply([], ["/r/a.md", "/r/c.md"])
    assert vocabulary() == {}
    assert_in_step(store)
