"""The SQLite library the daemon uses (``daemon/engine.py``): real
connections, a real subprocess for what the environment can turn on."""

from __future__ import annotations

import os
import subprocess
import sys

from kbindex.daemon.engine import sqlite

_READ_A_FILE = """
from kbindex.daemon.engine import sqlite
conn = sqlite.connect(":memory:")
for sql in ("SELECT fileio_read('/etc/hostname')", "SELECT readfile('/etc/hostname')"):
    try:
        conn.execute(sql).fetchone()
        print("read")
    except sqlite.OperationalError as exc:
        print("refused:", exc)
"""


def test_a_contentless_table_deletes_a_row_by_its_rowid() -> None:
    conn = sqlite.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, content='', contentless_delete=1)")
    conn.executemany("INSERT INTO t(rowid, a) VALUES (?, ?)", [(1, "kept word"), (2, "gone word")])
    conn.execute("DELETE FROM t WHERE rowid = 2")
    assert conn.execute("SELECT rowid FROM t WHERE t MATCH 'word'").fetchall() == [(1,)]
    assert conn.execute("SELECT rowid FROM t WHERE t MATCH 'gone'").fetchall() == []


def test_the_bundled_extensions_stay_off_whatever_the_environment_says() -> None:
    env = {**os.environ, "SQLEAN_ENABLE": "1", "SQLEAN_ENABLE_FILEIO": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _READ_A_FILE], env=env, capture_output=True, text=True, check=True
    )
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused: no such function") for line in lines)
