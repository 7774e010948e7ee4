"""The SQLite library every connection of the daemon uses: the build that sqlean.py
ships (SQLite 3.50), not the one Python's ``sqlite3`` links (3.40 on Debian 12, and
whatever a distribution ships elsewhere).

Why it earns its place: a contentless FTS5 table removes a row by its rowid alone from
SQLite 3.43 on (``contentless_delete=1``). Before that it must be told the words the
row was indexed with, so the index kept a compressed copy of every file's text to
derive them again, the largest table after ``docs``.
sqlean.py is the standard module compiled against a current SQLite with FTS5: the same
DB-API classes, functions and exceptions (its own), so code and types are the stdlib's.
Its bundled extensions (file I/O among them) are off unless the environment turns them
on when a connection opens (``SQLEAN_ENABLE*``): those variables are removed here,
before any connection, so the daemon's SQL can never read or write a file.

Every module that opens an index or vector file takes the module from here: two SQLite
libraries in one process must not open the same file (POSIX locks belong to the
process, and one library closing a descriptor drops the other's locks).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3 as sqlite
else:
    import sqlean as sqlite

for _flag in [name for name in os.environ if name.startswith("SQLEAN_ENABLE")]:
    del os.environ[_flag]

__all__ = ["sqlite"]
