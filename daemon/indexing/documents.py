"""A file's text becomes a document: the column values every backend indexes.

The columns, in the order ``bm25()`` weights them: ``name`` (path relative to its
root), ``title``, ``body``, ``subwords`` and ``grams`` (see ``tokens``); beside them the
text of its distinct words for the exact index (prefix queries), and its byte trigrams
for grep (``grams``). The indexer prepares them in its read-ahead worker and hands the
backend a ``Document``; no SQL here, each backend writes documents its own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbindex.daemon.index import tokens
from kbindex.daemon.index.values import NUL_MARK, Document, Loaded, Renamed, Row
from kbindex.daemon.indexing import grams, structure, textfile
from kbindex.daemon.indexing.kinds import Classifier

if TYPE_CHECKING:
    from kbindex.daemon.extracting.extractor import Extractor


def prepare(relpath: str, loaded: Loaded) -> Document:
    """``loaded`` (the file at ``relpath`` in its root) with its column values and
    structure."""
    row, exact = row_and_words(relpath, loaded.title, loaded.text)
    trigrams = grams.of_text(row[2], loaded.encoding)
    if "\x00" in loaded.text:
        trigrams += f"{NUL_MARK} "
    found = structure.of(relpath, loaded.text)
    return Document(loaded, row, exact, trigrams, found)


def row_and_words(relpath: str, title: str, body: str) -> tuple[Row, str]:
    """The column values of a document, and what ``docs_exact`` indexes of it (which
    shares their work): the distinct words of its path and body, and its derived words
    (the title is part of the body). Why distinct words: the table keeps no positions
    or counts (``detail=none``), so each word once is enough, and a text has about half
    as many distinct words as words."""
    # NUL (possible past the 8 KiB that text detection samples) separates words for
    # FTS5 anyway, and SQLite's JSON functions would cut the text at it: a space.
    if "\x00" in body:
        body, title = body.replace("\x00", " "), title.replace("\x00", " ")
    # The title is part of the body (a heading or front matter), so only the path and
    # the body feed the derived columns.
    found = tokens.chunks(relpath, body)
    subwords, grams = tokens.subwords_of(found, relpath, body), tokens.grams(relpath, body)
    return (relpath, title, body, subwords, grams), _exact(found, subwords, grams)


def _exact(found: dict[bytes, None], subwords: str, grams: str) -> str:
    return "\n".join((tokens.exact_words(found), subwords, grams))


@dataclass(frozen=True, slots=True)
class Renaming:
    """A moved file's rows made again under its new name (``index.Renamer``): its kind
    from its new path, its document read again from the file within the roots
    (``within``; a document's text from the cache of ``documents``), or made again from
    the text a shared index keeps."""

    kinds: Classifier
    within: textfile.Within
    documents: Extractor | None = None

    def kind(self, root: str, relpath: str) -> str:
        return self.kinds.of(root, relpath)

    def read(self, path: str, relpath: str, size: int) -> Renamed | None:
        text = textfile.current_text(path, self.within, size, self.documents)
        if text is None:
            return None
        row, exact = row_and_words(relpath, textfile.extract_title(text, path), text)
        return Renamed(row, exact, structure.of(relpath, text))

    def restored(self, relpath: str, title: str, body: str, encoding: str | None) -> Document:
        # As if loaded again: the file is not read.
        loaded = Loaded(text=body, encoding=encoding or "utf-8", title=title, size=0, mtime_ns=0)
        return prepare(relpath, loaded)
