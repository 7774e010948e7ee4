"""Word, PowerPoint and Excel files (Office Open XML): the text of their XML parts.
Runs in the worker.

Why not python-docx, python-pptx and openpyxl: three editors and lxml to read what is
the text nodes of a few parts; the parts are streamed here (``packages.elements``), so a
large workbook costs its text, not its object model.
"""

from __future__ import annotations

import re
import zipfile
from typing import Final

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
from kbindex.daemon.extracting.results import Extracted, Failed, Outcome, Reason, TooMuchText

_NUMBERED: Final = re.compile(r"(\d+)\.xml$")
_BREAKS: Final = frozenset({"br", "cr"})


def read(kind: str, data: bytes, max_chars: int) -> Outcome:
    try:
        with open_zip(data, "an Office file") as package:
            pages = Pages(max_chars)
            if kind == "docx":
                _document(package, pages)
            elif kind == "pptx":
                _numbered(package, "ppt/slides/slide", pages)
            else:
                _workbook(package, pages, max_chars)
            if pages.empty():
                return Failed(Reason.NO_TEXT, "no text in it")
            return Extracted(pages.text(), first_text(package, "docProps/core.xml", "title"))
    except Refused as refused:
        return refused.failed


def _paragraphs(package: zipfile.ZipFile, member: str) -> str:
    """The paragraphs of a WordprocessingML or DrawingML part, a line each."""
    out: list[str] = []
    for event, element in elements(required(package, member)):
        if event != "end":
            continue
        name = local(element.tag)
        if name == "t":
            out.append(element.text or "")
        elif name == "tab":
            out.append("\t")
        elif name in _BREAKS:
            out.append("\n")
        elif name == "p":
            out.append("\n")
            element.clear()
    return "".join(out)


def _document(package: zipfile.ZipFile, pages: Pages) -> None:
    pages.add(_paragraphs(package, "word/document.xml"))


def _members(package: zipfile.ZipFile, prefix: str) -> list[str]:
    """The parts ``prefix``N.xml, by N."""
    found = []
    for name in package.namelist():
        if name.startswith(prefix):
            number = _NUMBERED.fullmatch(name[len(prefix) :])
            if number:
                found.append((int(number.group(1)), name))
    return [name for _, name in sorted(found)]


def _numbered(package: zipfile.ZipFile, prefix: str, pages: Pages) -> None:
    """Each slide a page."""
    for member in _members(package, prefix):
        pages.add(_paragraphs(package, member))


def _workbook(package: zipfile.ZipFile, pages: Pages, max_chars: int) -> None:
    """Each sheet a page: its name, then a line per row, the cells tab-separated."""
    shared = _shared_strings(package, max_chars)
    names = _sheet_names(package)
    for number, member in enumerate(_members(package, "xl/worksheets/sheet")):
        stream = part(package, member)
        if stream is None:
            continue
        rows = [names[number] if number < len(names) else ""]
        cells: list[str] = []
        kind, value = "", ""
        for event, element in elements(stream):
            name = local(element.tag)
            if event == "start":
                if name == "c":
                    kind, value = element.get("t", ""), ""
                continue
            if name in ("v", "t"):
                value += element.text or ""
            elif name == "c":
                if kind == "s":
                    try:
                        value = shared[int(value)]
                    except (ValueError, IndexError):
                        value = ""
                if value:
                    cells.append(value)
            elif name == "row":
                rows.append("\t".join(cells))
                cells = []
                element.clear()
        pages.add("\n".join(rows))


def _shared_strings(package: zipfile.ZipFile, max_chars: int) -> list[str]:
    stream = part(package, "xl/sharedStrings.xml")
    if stream is None:
        return []
    strings: list[str] = []
    pieces: list[str] = []
    used = 0
    for event, element in elements(stream):
        if event != "end":
            continue
        name = local(element.tag)
        if name == "t":
            pieces.append(element.text or "")
        elif name == "si":
            strings.append("".join(pieces))
            used += len(strings[-1])
            if used > max_chars:
                raise TooMuchText(f"more than {max_chars:,} characters of shared strings")
            pieces = []
            element.clear()
    return strings


def _sheet_names(package: zipfile.ZipFile) -> list[str]:
    stream = part(package, "xl/workbook.xml")
    if stream is None:
        return []
    return [
        element.get("name", "")
        for event, element in elements(stream)
        if event == "end" and local(element.tag) == "sheet"
    ]
