"""Indexing a large file takes memory in proportion to a bounded piece of it, not many
times its size: the trigram numbers are made a chunk at a time, and SQLite gets a long
document as plain parameters rather than through its JSON functions. Kernel-size trees
hold headers of 8-10 MB; each of them set the daemon's peak memory.

SQLite's own allocations are read with ``sqlite3_memory_highwater`` from the library
the daemon's connections use (``engine``). Nothing is mocked.
"""

from __future__ import annotations

import ctypes
import importlib.util
import random
import tracemalloc
from pathlib import Path

import pytest
from conftest import note
from kbindex.daemon.backends.sqlite import documents, schema
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Batch, Document
from kbindex.daemon.indexing import grams

MB = 1 << 20


def windows(data: bytes) -> set[str]:
    return {data[i : i + 3].hex() for i in range(len(data) - 2)}


def identifiers(count: int, seed: int) -> str:
    """Lines of distinct register-like names, as the kernel's big headers hold."""
    rng = random.Random(seed)
    return "".join(
        f"#define REG_{rng.randrange(1 << 40):010X}_{i}__FIELD_MASK 0x{i:08x}L\n"
        for i in range(count)
    )


def test_trigrams_of_an_8_mb_text_take_a_few_times_a_chunk_not_the_text() -> None:
    text = identifiers(8 * MB // 50, seed=1)
    grams.of_text("warm up: the scratch table exists before measuring", "utf-8")
    tracemalloc.start()
    try:
        tokens = grams.of_text(text, "utf-8")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The text's bytes (one copy) and the arrays of one chunk; all at once, the numpy
    # temporaries took about 16 bytes per byte of text.
    assert peak < len(text) + 24 * MB
    assert set(tokens.split()) == windows(text.encode().lower())


def _resident_kb(start: int, size: int) -> int:
    """Resident KB of the mappings over ``size`` bytes at ``start`` (/proc/self/smaps;
    an madvise splits a mapping in two)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(x, 16) for x in head.split("-"))
            inside = low < start + size and start < high
        elif inside and head == "Rss:":
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc")
def test_the_scratch_table_holds_only_the_pages_a_text_touches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(grams, "_tables", [])  # a fresh table, untouched
    # 40 trigrams far apart in the table: 40 pages, or 40 huge pages of 2 MB each if
    # the table were advised for them (numpy does so for its own large arrays).
    text = " ".join(f"{chr(0x21 + i)}{chr(0x21 + i)}" for i in range(40))
    assert len(grams.of_text(text, "utf-8").split()) >= 40
    table = grams._table()
    assert _resident_kb(table.ctypes.data, table.nbytes) < 1024


def test_every_trigram_once_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    alphabet = "abcABC xyz\n_é中\u212a"
    monkeypatch.setattr(grams, "CHUNK_BYTES", 5)
    for n in [0, 3, 4, 5, 6, 7, 8, 11, 200, 3]:
        text = "".join(rng.choice(alphabet) for _ in range(n))
        tokens = grams.of_text(text, "utf-8").split()
        assert len(tokens) == len(set(tokens))
        assert set(tokens) == windows(text.encode("utf-8").lower())


def _sqlite_library() -> ctypes.CDLL:
    """The SQLite library the daemon's connections use (``engine``): sqlean.py links it
    into its extension module and exports its functions, so loading that file again
    gives the same library, with the same memory counters."""
    spec = importlib.util.find_spec("sqlean._sqlite3")
    assert spec is not None and spec.origin is not None
    lib = ctypes.CDLL(spec.origin)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    lib.sqlite3_memory_highwater.restype = ctypes.c_int64
    probe = sqlite.connect(":memory:")
    try:
        assert lib.sqlite3_memory_used() > 0, "not the library the connections use"
    finally:
        probe.close()
    return lib


def test_a_large_document_is_written_in_a_few_times_its_size(tmp_path: Path) -> None:
    lib = _sqlite_library()
    store = Store(tmp_path / "index.sqlite3")
    store.open()
    try:
        rng = random.Random(2)
        words = ["spin", "lock", "irq", "device", "driver", "kernel", "memory", "page"]
        big = " ".join(rng.choice(words) for _ in range(250_000)) + "\n" + identifiers(1, seed=2)
        small = [note(f"small{i}.md", f"smallword{i} text") for i in range(3)]
        before = lib.sqlite3_memory_used()
        lib.sqlite3_memory_highwater(1)
        store.apply(Batch([note("big.h", big), *small]))
        grown = lib.sqlite3_memory_highwater(0) - before
        # Through SQLite's JSON functions this took about fourteen times the text; as
        # parameters about four (FTS5's own pending index of the document included).
        assert grown < 8 * len(big)
        conn = store.writer
        name = big.split()[-2]
        for table, query in (
            ("docs", f'"{name}"'),
            ("docs_exact", name.split("_")[1]),
            ("docs_grams", " ".join(grams.tokens(name.lower().encode()))),
            ("docs", "smallword2"),
        ):
            hits = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (query,))
            assert hits.fetchone()[0] == 1, (table, query)
        # Taken out again, its words go with it (the contentless tables are told them).
        store.apply(Batch(deletes=["/r/big.h"]))
        for table in documents.TABLES:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        vocabulary = {t for (t,) in conn.execute(f"SELECT term FROM {schema.VOCABULARY}")}
        assert name.split("_")[1].lower() not in vocabulary
        assert "smallword2" in vocabulary
    finally:
        store.close()


def test_the_tables_of_a_large_document_never_hold_its_terms_at_once(tmp_path: Path) -> None:
    lib = _sqlite_library()
    store = Store(tmp_path / "index.sqlite3")
    store.open()
    try:
        conn = store.writer
        store.apply(Batch([note("warm.md", "warm up")]))
        big = identifiers(60_000, seed=3)  # 3.2 MB, about 180,000 distinct terms
        before = lib.sqlite3_memory_used()
        lib.sqlite3_memory_highwater(1)
        store.apply(Batch([note("big.h", big)]))
        grown = lib.sqlite3_memory_highwater(0) - before
        # Each table's pending terms written out before the next table's come: 25 times
        # the text; with docs' still held while docs_exact took the same words, 37 times.
        assert grown < 30 * len(big)
        # Written out inside the transaction, not at its commit.
        conn.execute("BEGIN")
        segments = conn.execute("SELECT count(*) FROM docs_data").fetchone()[0]
        doc = note("big2.h", big.lower()).given
        assert isinstance(doc, Document)
        documents.insert(conn, [documents.entry(99, doc)])
        assert conn.execute("SELECT count(*) FROM docs_data").fetchone()[0] > segments
        conn.execute("ROLLBACK")
    finally:
        store.close()
