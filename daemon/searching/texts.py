"""The one reader of a file's text for clients: a hit's snippet, the passages to
embed, a document's pages, read_file.

``app`` builds one ``Texts`` from the roots and the documents' reader (the
``documents`` extra's ``Extractor``, or None without it) and hands it to whoever reads
text for a client: the service, and (``Texts.current``, as ``index.Texts``) an index
that keeps no text. Every path is read within this daemon's roots, whatever the index's
rows say of it, and a document is its extracted text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbindex.daemon.indexing import textfile

if TYPE_CHECKING:
    from kbindex.daemon.extracting.extractor import Extractor
    from kbindex.daemon.roots import Roots


class Texts:
    def __init__(self, roots: Roots, documents: Extractor | None = None) -> None:
        self.roots = roots
        self.documents = documents
        """The documents' reader (None: documents are not read)."""

    def current(self, path: str, indexed_size: int) -> str | None:
        """The text of the indexed file ``path`` as it is now (``indexed_size``: its
        size as indexed), or None (``textfile.current_text``): a document's from the
        cache only, never waiting for an extraction."""
        return textfile.current_text(path, self.roots.inside, indexed_size, self.documents)

    def load(self, path: str, max_bytes: int) -> textfile.Loaded | textfile.Skipped:
        """The file ``path`` whole, as ``textfile.load`` reads it within the roots (a
        document extracted if the cache does not hold it yet): for read_file. Raises
        ``textfile.Vanished`` and ``textfile.Escaped``."""
        return textfile.load(path, max_bytes, within=self.roots.inside, documents=self.documents)

    def extracted_bytes(self) -> int:
        """The size of the documents' cache (0 without one): it counts in the index's."""
        return 0 if self.documents is None else self.documents.size_bytes()
