"""An EPUB book: its chapters in reading order (the spine), a page each.
Runs in the worker.

Why not EbookLib: it is AGPL-licensed; an EPUB is a zip whose OPF file lists the
chapters, each a web page (``webpage``).
"""

from __future__ import annotations

import posixpath
import zipfile
from urllib.parse import unquote

from kbindex.daemon.extracting import webpage
from kbindex.daemon.extracting.packages import Refused, elements, local, open_zip, part, required
from kbindex.daemon.extracting.pages import Pages
from kbindex.daemon.extracting.results import Extracted, Failed, Outcome, Reason


def read(data: bytes, max_chars: int) -> Outcome:
    try:
        with open_zip(data, "an EPUB book") as package:
            opf = _package_document(package)
            title, chapters = _spine(package, opf)
            encrypted = _encrypted(package)
            pages = Pages(max_chars)
            for chapter in chapters:
                if chapter in encrypted:
                    raise Refused(Failed(Reason.ENCRYPTED, f"{chapter} is encrypted (DRM)"))
                stream = part(package, chapter)
                if stream is not None:
                    pages.add(webpage.text_and_title(stream.read())[0])
            if pages.empty():
                return Failed(Reason.NO_TEXT, "no text in its chapters")
            return Extracted(pages.text(), title)
    except Refused as refused:
        return refused.failed


def _package_document(package: zipfile.ZipFile) -> str:
    stream = part(package, "META-INF/container.xml")
    if stream is not None:
        for event, element in elements(stream):
            if event == "end" and local(element.tag) == "rootfile":
                path = element.get("full-path")
                if path:
                    return path
    raise Refused(Failed(Reason.DAMAGED, "no package document (META-INF/container.xml)"))


def _spine(package: zipfile.ZipFile, opf: str) -> tuple[str, list[str]]:
    stream = required(package, opf)
    base = posixpath.dirname(opf)
    title = ""
    items: dict[str, str] = {}
    order: list[str] = []
    for event, element in elements(stream):
        if event != "end":
            continue
        name = local(element.tag)
        if name == "title" and not title:
            title = (element.text or "").strip()
        elif name == "item":
            href = element.get("href")
            if href:
                items[element.get("id", "")] = posixpath.normpath(
                    posixpath.join(base, unquote(href))
                )
        elif name == "itemref":
            order.append(element.get("idref", ""))
    return title, [items[i] for i in order if i in items]


def _encrypted(package: zipfile.ZipFile) -> set[str]:
    """The parts META-INF/encryption.xml lists (fonts are obfuscated so, chapters only
    under DRM)."""
    stream = part(package, "META-INF/encryption.xml")
    if stream is None:
        return set()
    return {
        unquote(element.get("URI", ""))
        for event, element in elements(stream)
        if event == "end" and local(element.tag) == "CipherReference"
    }
