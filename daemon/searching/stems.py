"""A word's stem as the index's own tokenizer makes it: SQLite's ``porter``.

Snippets mark a word only where the search matched it, and a search by words matches
a word of the text when its stem is the query word's stem (``notes`` is ``note``, not
``not``; ``running`` is ``run``). Asking the same tokenizer the index was built with,
rather than a second implementation of Porter's algorithm, keeps the two in step: the
PostgreSQL backend stems with Snowball's original Porter, which agrees with it
(``postgres/schema.py``).

One in-memory FTS5 table per thread; a word is inserted in a transaction that is
rolled back, and its stem read through ``fts5vocab``; stems are cached, so each
distinct word costs that once.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Final

from kbindex.daemon.engine import TOKENIZER, sqlite

_CACHED: Final = 1 << 16


class _Tokenizer(threading.local):
    def __init__(self) -> None:
        self.conn = sqlite.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute(
            f"CREATE VIRTUAL TABLE words USING fts5(w, tokenize='{TOKENIZER}', detail=none)"
        )
        self.conn.execute("CREATE VIRTUAL TABLE stems USING fts5vocab(words, 'row')")


_local = _Tokenizer()


@lru_cache(maxsize=_CACHED)
def stem(word: str) -> str:
    """The stem of ``word``, one word as the tokenizer sees one (letters and digits);
    the word itself, lower-cased, when the tokenizer finds no single token in it."""
    conn = _local.conn
    conn.execute("BEGIN")
    try:
        conn.execute("INSERT INTO words(rowid, w) VALUES (1, ?)", (word,))
        rows = conn.execute("SELECT term FROM stems").fetchall()
    finally:
        conn.execute("ROLLBACK")
    return str(rows[0][0]) if len(rows) == 1 else word.lower()
