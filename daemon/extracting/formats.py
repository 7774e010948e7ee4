"""Which files are documents, by name: the kind decides the reader and the message.

Needs nothing installed, so that without ``kbindex[documents]`` ``kbctl why`` can still
say which extra would read a file. The readers check the bytes (a ``.pdf`` that is not a
PDF is damaged, a ``.docx`` that is an OLE file is encrypted).
"""

from __future__ import annotations

import os
from typing import Final

EXTRA: Final = "kbindex[documents]"

KINDS: Final[dict[str, str]] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".docm": "docx",
    ".pptx": "pptx",
    ".pptm": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".odt": "odt",
    ".ods": "ods",
    ".odp": "odp",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".epub": "epub",
}

NAMES: Final[dict[str, str]] = {
    "pdf": "a PDF document",
    "docx": "a Word document",
    "pptx": "a PowerPoint presentation",
    "xlsx": "an Excel workbook",
    "odt": "an OpenDocument text",
    "ods": "an OpenDocument spreadsheet",
    "odp": "an OpenDocument presentation",
    "html": "a web page",
    "epub": "an EPUB book",
}

TEXT_KINDS: Final = frozenset({"html"})
"""Kinds that are text too: without the extra they are indexed as text, as before."""


CAPPED_SUFFIXES: Final = frozenset(s for s, k in KINDS.items() if k not in TEXT_KINDS)
"""The extensions of the files ``size_cap`` gives the documents' cap."""


def size_cap(path: str, text_bytes: int, document_bytes: int) -> int:
    """The size cap of ``path``: ``document_bytes`` for a document that is not text
    too (a web page is text-sized, and read as text without the extra)."""
    found = kind(path)
    return document_bytes if found is not None and found not in TEXT_KINDS else text_bytes


def kind(path: str) -> str | None:
    """The document kind of ``path`` by its extension, or None for any other file."""
    return KINDS.get(os.path.splitext(path)[1].lower())


def unread(kind: str) -> str:
    """Why a document of ``kind`` is not read without the extra."""
    return f"{NAMES[kind]}: the extra {EXTRA} reads it"
