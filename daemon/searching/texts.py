"""The one reader of an indexed file's text for clients: what a hit's snippet, a
passage to embed and a file's pages are made from.

An index that keeps no text (SQLite) is handed ``Texts.current`` and reads through it
(``index.Texts``); the daemon reads through the same object. Every path is read within
this daemon's roots, whatever the index's rows say of it.
"""

from __future__ import annotations

from kbindex.daemon.indexing import textfile
from kbindex.daemon.roots import Roots


class Texts:
    def __init__(self, roots: Roots) -> None:
        self.roots = roots

    def current(self, path: str, indexed_size: int) -> str | None:
        """The text of the indexed file ``path`` as it is now (``indexed_size``: its
        size as indexed), or None (``textfile.current_text``)."""
        return textfile.current_text(path, self.roots.inside, indexed_size)
