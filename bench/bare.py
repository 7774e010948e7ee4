"""The engine's ceiling: the corpus bulk-loaded into a bare FTS5 table, in-process.

Stage ``bare`` (the default) is stdlib only, no kbindex code: walk the directory, read
and decode each file, insert it into one fts5 table (name, title, body) with the
daemon's tokenizer, all in one transaction on a WAL database. Whatever kbindexd does
beyond this shows up as the gap between the two throughputs.

The other stages add, one at a time and still in one thread without the daemon, what
kbindexd's write path does, so the gap can be split into its causes (each stage
includes the ones before it):

``load``     files read and decoded by ``kbindex.daemon.indexing.textfile.load`` (text detection,
             encodings, the title), the title stored in its column
``derived``  the derived columns ``subwords`` and ``grams`` (``kbindex.daemon.index.tokens``):
             the daemon's 5-column ``docs`` table
``exact``    plus an unstemmed ``docs_exact`` table with every column and position
             (two FTS5 inserts per document), in the same file and the same thread
``store``    the daemon's own ``Store.apply`` on its real schema (``docs`` and the
             contentless, position-free ``docs_exact`` in one transaction): ``files``
             rows, one transaction per batch (``indexer.BATCH_FILES``); the derived
             columns here on the writer's thread

    python bench/bare.py CORPUS_DIR /tmp/bare.sqlite3                 # the ceiling
    python bench/bare.py CORPUS_DIR /tmp/bare.sqlite3 --like-daemon   # every stage
    python bench/bare.py CORPUS_DIR /tmp/bare.sqlite3 --stage derived
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TOKENIZER = "porter unicode61 remove_diacritics 2"  # as daemon/backends/sqlite/store.py
EXACT_TOKENIZER = "unicode61 remove_diacritics 2"
STAGES = ("bare", "load", "derived", "exact", "store")
MAX_FILE_BYTES = 10 * 1024 * 1024  # the daemon's default max_file_size_mb


def _paths(root: str) -> Iterator[tuple[str, str]]:
    """(absolute path, relative path) of every file, in os.walk order."""
    prefix = len(root) + 1
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            yield path, path[prefix:]


def _documents(root: str, totals: list[int]) -> Iterator[tuple[str, str, str]]:
    for path, rel in _paths(root):
        with open(path, "rb") as fh:
            data = fh.read()
        totals[0] += 1
        totals[1] += len(data)
        yield rel, "", data.decode("utf-8", errors="replace")


def _loaded(root: str, totals: list[int]) -> Iterator[tuple[str, str, str]]:
    from kbindex.daemon.indexing import textfile

    for path, rel in _paths(root):
        loaded = textfile.load(path, MAX_FILE_BYTES)
        totals[0] += 1
        totals[1] += loaded.size
        if isinstance(loaded, textfile.Loaded):
            yield rel, loaded.title, loaded.text


def _derived(
    rows: Iterator[tuple[str, str, str]], spent: list[float]
) -> Iterator[tuple[str, str, str, str, str]]:
    """Add the daemon's derived columns to each row; ``spent[0]`` accumulates their cost."""
    from kbindex.daemon.index import tokens

    for rel, title, body in rows:
        t = time.perf_counter()
        subwords = tokens.subwords_of(tokens.chunks(rel, body), rel, body)
        grams = tokens.grams(rel, body)
        spent[0] += time.perf_counter() - t
        yield rel, title, body, subwords, grams


def _schema(conn: sqlite3.Connection, stage: str) -> None:
    cols = "name, title, body"
    if stage not in ("bare", "load"):
        cols += ", subwords, grams"
    conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5({cols}, tokenize='{TOKENIZER}')")
    if stage == "exact":
        conn.execute(
            f"CREATE VIRTUAL TABLE docs_exact USING fts5({cols}, content='docs',"
            f" tokenize='{EXACT_TOKENIZER}')"
        )


def _load_tables(conn: sqlite3.Connection, root: str, stage: str, totals: list[int]) -> float:
    """Stages bare..exact: one transaction, executemany. Returns seconds in tokens.*."""
    spent = [0.0]
    _schema(conn, stage)
    conn.execute("BEGIN")
    if stage == "bare":
        conn.executemany(
            "INSERT INTO docs(name, title, body) VALUES (?, ?, ?)", _documents(root, totals)
        )
    elif stage == "load":
        conn.executemany(
            "INSERT INTO docs(name, title, body) VALUES (?, ?, ?)", _loaded(root, totals)
        )
    else:
        cols = "name, title, body, subwords, grams"
        insert = f"INSERT INTO docs(rowid, {cols}) VALUES (?, ?, ?, ?, ?, ?)"
        exact = f"INSERT INTO docs_exact(rowid, {cols}) VALUES (?, ?, ?, ?, ?, ?)"
        rows = _derived(_loaded(root, totals), spent)
        for rowid, row in enumerate(rows, 1):
            conn.execute(insert, (rowid, *row))
            if stage == "exact":
                conn.execute(exact, (rowid, *row))
    conn.execute("COMMIT")
    return spent[0]


def _load_store(db_path: Path, root: str, totals: list[int]) -> float:
    """Stage store: the daemon's Store.apply, batch by batch, in this thread."""
    from kbindex.daemon.backends.sqlite.store import Store
    from kbindex.daemon.index import tokens
    from kbindex.daemon.index.values import Batch, Update
    from kbindex.daemon.indexing import textfile
    from kbindex.daemon.indexing.documents import prepare
    from kbindex.daemon.indexing.indexer import BATCH_FILES
    from kbindex.daemon.indexing.kinds import Classifier
    from kbindex.daemon.indexing.scanner import Seen
    from kbindex.daemon.roots import Roots
    from kbindex.daemon.searching.texts import Texts

    KINDS = Classifier()

    # Time inside the derived-column functions, as documents.row_and_words calls them.
    spent = [0.0]
    names = ("chunks", "subwords_of", "exact_words", "grams")
    originals = {name: getattr(tokens, name) for name in names}

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[0] += time.perf_counter() - t

        return wrapper

    for name, fn in originals.items():
        setattr(tokens, name, timed(fn))
    store = Store(db_path, Texts(Roots((Path(root),))).current)
    store.open()
    try:
        batch: list[Any] = []
        for path, _rel in _paths(root):
            st = os.stat(path)
            loaded = textfile.load(path, MAX_FILE_BYTES)
            totals[0] += 1
            totals[1] += st.st_size
            seen = Seen(path, root, st.st_size, st.st_mtime_ns)
            if isinstance(loaded, textfile.Loaded):
                loaded = prepare(seen.relpath, loaded)
            batch.append(Update(seen, loaded, KINDS.of(seen.root, seen.relpath)))
            if len(batch) >= BATCH_FILES:
                store.apply(Batch(batch))
                batch = []
        if batch:
            store.apply(Batch(batch))
    finally:
        for name, fn in originals.items():
            setattr(tokens, name, fn)
        store.close()
    return spent[0]


def load(corpus_dir: Path, db_path: Path, stage: str = "bare") -> dict[str, Any]:
    """Index every file under ``corpus_dir`` into a new database at ``db_path``."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    root = str(corpus_dir.resolve())
    totals = [0, 0]
    started, cpu = time.perf_counter(), time.process_time()
    if stage == "store":
        derived_s = _load_store(db_path, root, totals)
    else:
        conn = sqlite3.connect(db_path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        derived_s = _load_tables(conn, root, stage, totals)
        conn.close()  # the last connection checkpoints the WAL into the main file
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    result: dict[str, Any] = {
        "stage": stage,
        "files": totals[0],
        "bytes": totals[1],
        "seconds": round(seconds, 3),
        "mb_per_s": round(totals[1] / 1e6 / seconds, 2),
        "cpu_s": round(cpu, 2),
        "index_bytes": db_path.stat().st_size,
        "tables": table_sizes(db_path),
    }
    if stage not in ("bare", "load"):
        result["derived_columns_s"] = round(derived_s, 3)
    return result


def merge(db_path: Path) -> dict[str, float]:
    """Merge a loaded table into one segment, as kbindexd does after a full index
    (``Store.optimize``): the bulk load leaves the segments automerge has not folded."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    started, cpu = time.perf_counter(), time.process_time()
    conn.execute("INSERT INTO docs(docs) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    return {"seconds": round(seconds, 3), "cpu_s": round(cpu, 2)}


class Searcher:
    """Bare FTS5 searches on a loaded table: the top 10 by bm25 with snippets, and the
    total when there are more, the work a search reply needs, without socket or threads."""

    TOP = (
        "SELECT rowid, name, title, body, rank, snippet(docs, 2, '[', ']', '...', 24)"
        " FROM docs WHERE docs MATCH ? AND rank MATCH 'bm25(2.0, 3.0, 1.0)'"
        " ORDER BY rank LIMIT 10"
    )

    def __init__(self, db_path: Path) -> None:
        self.conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)

    def ms(self, match: str) -> float:
        """Milliseconds for one MATCH expression."""
        started = time.perf_counter_ns()
        if len(self.conn.execute(self.TOP, (match,)).fetchall()) == 10:
            self.conn.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (match,)).fetchone()
        return (time.perf_counter_ns() - started) / 1e6

    def close(self) -> None:
        self.conn.close()


def table_sizes(db_path: Path) -> dict[str, int]:
    """Checkpoint a database nobody else has open, then bytes per table and index."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC, 1")
        sizes = {name: int(size) for name, size in rows}
    except sqlite3.OperationalError:  # built without dbstat
        sizes = {}
    conn.close()
    return {"file": db_path.stat().st_size, **sizes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", type=Path)
    p.add_argument("db", type=Path, help="database to create (replaced if it exists)")
    p.add_argument("--stage", choices=STAGES, default="bare")
    p.add_argument("--like-daemon", action="store_true", help="run every stage in turn")
    args = p.parse_args(argv)
    for stage in STAGES if args.like_daemon else (args.stage,):
        result = load(args.corpus, args.db, stage)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
