"""A document's text as pages: built under the output cap, and located by line.

Each page after the first begins with a form feed at the start of a line (``\\f``), as
pdftotext and ripgrep-all write it; lines are counted by ``\\n`` alone, as snippets count
them, so a line number of the whole text and (page, line in page) map both ways.
"""

from __future__ import annotations

import re

from kbindex.daemon.extracting.results import TooMuchText

FORM_FEED = "\f"
_SPACES = re.compile(r"[ \t\r\v\xa0]+\n")
_BLANKS = re.compile(r"\n{3,}")


class Pages:
    """Pages of text added one by one; raises TooMuchText past ``max_chars`` in all."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.parts: list[str] = []
        self.used = 0

    def add(self, text: str) -> None:
        page = tidy(text)
        self.used += len(page) + 2
        if self.used > self.max_chars:
            raise TooMuchText(f"more than {self.max_chars:,} characters of text")
        self.parts.append(page)

    def text(self) -> str:
        return ("\n" + FORM_FEED).join(self.parts)

    def empty(self) -> bool:
        return not any(p.strip() for p in self.parts)


def tidy(text: str) -> str:
    """``text`` with its line ends as ``\\n``, no form feed of its own, no trailing
    spaces on a line and at most one blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace(FORM_FEED, "\n")
    text = _SPACES.sub("\n", text)
    return _BLANKS.sub("\n\n", text).strip("\n")


def locate(text: str, line: int) -> tuple[int, int]:
    """(page, line within the page) of line ``line`` (1-based, counted by ``\\n``) of
    ``text``; (0, line) when ``text`` has a single page."""
    if FORM_FEED not in text:
        return 0, line
    page, start_line, number = 1, 1, 1
    for number, row in enumerate(text.split("\n")[:line], start=1):
        if row.startswith(FORM_FEED):
            page, start_line = page + 1, number
    return page, line - start_line + 1


def starts(text: str) -> list[int]:
    """The line (1-based, counted by ``\\n``) each page of ``text`` starts at: [1] for
    a text of one page."""
    found, line, counted = [1], 1, 0
    at = text.find("\n" + FORM_FEED)
    while at >= 0:
        line += text.count("\n", counted, at + 1)
        counted = at + 1
        found.append(line)
        at = text.find("\n" + FORM_FEED, counted)
    return found


def lines_of(text: str, page: int) -> tuple[int, int] | None:
    """(first line, last line) of page ``page`` (1-based) of ``text``; None past its
    last page."""
    begins = starts(text)
    if not 1 <= page <= len(begins):
        return None
    if page < len(begins):
        return begins[page - 1], begins[page] - 1
    return begins[page - 1], text.count("\n") + 1
