"""OpenDocument text, spreadsheets and presentations: the text of content.xml.
Runs in the worker.

Why not odfpy: it builds the whole document's object model (and was last released in
2020); the text is the paragraphs of one part, streamed here (``packages.elements``).
"""

from __future__ import annotations

import zipfile
from typing import Final
from xml.etree.ElementTree import Element

from kbindex.daemon.extracting.packages import (
    Refused,
    elements,
    first_text,
    local,
    open_zip,
    part,
    required,
)
from kbindex.daemon.extracting.pages import Pages
from kbindex.daemon.extracting.results import Extracted, Failed, Outcome, Reason

_PAGE_ELEMENT: Final = {"ods": "table", "odp": "page"}
"""What makes a page: a sheet of a spreadsheet, a slide of a presentation."""
_INLINE: Final = {"s": " ", "tab": "\t", "line-break": "\n"}


def read(kind: str, data: bytes, max_chars: int) -> Outcome:
    try:
        with open_zip(data, "an OpenDocument file") as package:
            _refuse_encrypted(package)
            pages = Pages(max_chars)
            _content(package, pages, _PAGE_ELEMENT.get(kind))
            if pages.empty():
                return Failed(Reason.NO_TEXT, "no text in it")
            return Extracted(pages.text(), first_text(package, "meta.xml", "title"))
    except Refused as refused:
        return refused.failed


def _refuse_encrypted(package: zipfile.ZipFile) -> None:
    stream = part(package, "META-INF/manifest.xml")
    if stream is not None and b"encryption-data" in stream.read():
        raise Refused(Failed(Reason.ENCRYPTED, "saved with a password"))


def _content(package: zipfile.ZipFile, pages: Pages, page_element: str | None) -> None:
    stream = required(package, "content.xml")
    lines: list[str] = []
    row: list[str] | None = None
    cell: list[str] | None = None
    started = False
    for event, element in elements(stream):
        name = local(element.tag)
        if event == "start":
            if name == page_element:
                if started:
                    pages.add("\n".join(lines))
                    lines = []
                started = True
                if page_element == "table":
                    lines.append(_attribute(element, "name"))
            elif name == "table-row":
                row = []
            elif name == "table-cell":
                cell = []
            continue
        if name in _INLINE:
            element.text = _INLINE[name] * min(int(_attribute(element, "c") or 1), 80)
        elif name in ("p", "h"):
            text = "".join(element.itertext())
            tail = element.tail
            element.clear()  # an enclosing paragraph (a note's) must not repeat it
            element.tail = tail
            (cell if cell is not None else lines).append(text)
        elif name == "table-cell" and cell is not None:
            if row is not None and any(cell):
                row.append(" ".join(cell))
            cell = None
        elif name == "table-row" and row is not None:
            if row:
                lines.append("\t".join(row))
            row = None
            element.clear()
    pages.add("\n".join(lines))


def _attribute(element: Element, name: str) -> str:
    for key, value in element.attrib.items():
        if local(key) == name:
            return value
    return ""
