"""The write-ahead logs are copied into the database files beside the writer
(``daemon/backends/sqlite/checkpointer.py``): real SQLite files, real commits, nothing mocked."""

from __future__ import annotations

import random
import shutil
from contextlib import closing
from pathlib import Path

import pytest
from conftest import note
from kbindex.daemon.backends.sqlite import checkpointer
from kbindex.daemon.backends.sqlite.checkpointer import Checkpointer
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Batch


def _file_alone(db: Path, copy: Path) -> sqlite.Connection:
    """What the database file holds by itself, without its log: a copy of the file."""
    shutil.copyfile(db, copy)
    return sqlite.connect(copy)


def test_a_commit_reaches_the_database_file_in_the_background(store: Store, tmp_path: Path) -> None:
    store.apply(Batch([note("a.md", "walrus harbour")]))
    store.maintain("refresh")
    with closing(_file_alone(store.db_path, tmp_path / "main-copy")) as main:
        assert main.execute("SELECT relpath FROM files").fetchall() == [("a.md",)]
        words = main.execute("SELECT term FROM docs_exact_words WHERE term = 'walrus'")
        assert words.fetchall() == [("walrus",)]


@pytest.mark.slow
def test_a_long_run_of_batches_keeps_the_log_bounded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The limit is lowered so that a few MB of writes show it (the default is 64 MB).
    monkeypatch.setattr(checkpointer, "LOG_LIMIT_BYTES", 256 << 10)
    rng = random.Random(7)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=8)) for _ in range(5000)]
    wal = Path(f"{store.db_path}-wal")
    largest = 0
    for batch in range(60):
        notes = [
            note(f"b{batch}/n{i}.md", " ".join(rng.choices(vocabulary, k=3000))) for i in range(4)
        ]
        store.apply(Batch(notes))
        largest = max(largest, wal.stat().st_size)
    store.checkpoints.settle()
    with closing(sqlite.connect(store.db_path)) as conn:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    # The log restarts instead of growing with the index: at most the limit plus the
    # largest transaction (FTS5 merging the segments of three tables writes a few MB at
    # once; random letters give every note thousands of distinct trigrams).
    assert pages * page_size > 8 << 20  # 32 times the limit
    assert largest < 8 << 20


def test_a_file_that_is_gone_is_skipped_not_created(tmp_path: Path) -> None:
    """A rebuild moves the file aside while a checkpoint may be queued: the checkpoint
    must not create an empty database in its place."""
    gone = tmp_path / "gone.sqlite3"
    checkpoints = Checkpointer(gone)
    checkpoints.wrote()
    checkpoints.settle()
    checkpoints.close()
    assert not gone.exists()
