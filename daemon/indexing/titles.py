"""A document's title, by the kind of file it is.

A title is shown to people and agents beside every hit and weighs more than the body
in ranking, so it must be what the author meant as one: a Markdown (or plain-text)
note's front-matter ``title:`` or first ``# `` heading, a reStructuredText document's
first underlined section title, a Python module's docstring's first line. A ``#`` line
in code or a configuration file is a comment (``# flake8: noqa``, a licence header),
never a title: other kinds of file have none.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Final

TITLE_SCAN_CHARS: Final = 4000
MAX_TITLE_CHARS: Final = 300
MARKDOWN: Final = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx", ".txt"})
"""Plain text too: notes in ``.txt`` use Markdown's headings as often as not."""
RESTRUCTURED: Final = frozenset({".rst", ".rest"})
PYTHON: Final = frozenset({".py", ".pyi", ".pyw"})

_FRONT_MATTER_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_ADORNMENT = re.compile(r"([=\-~^\"'`#*+.:_])\1*")
_DOCSTRING = re.compile(
    r"\A\ufeff?(?:[ \t]*(?:#[^\n]*)?\r?\n)*(?:[rRuU])?(\"\"\"|'''|\"|')"
)  # comments and blank lines (a shebang, an encoding line), then the opening quote


def extract_title(text: str, name: str | None = None) -> str:
    """The title of ``text``, a file called ``name`` (its kind by its extension);
    Markdown's rules when the name is not known."""
    head = text[:TITLE_SCAN_CHARS]
    suffix = None if name is None else os.path.splitext(name)[1].lower()
    if suffix is None or suffix in MARKDOWN:
        return _markdown(head)
    if suffix in RESTRUCTURED:
        return _restructured(head)
    if suffix in PYTHON:
        return _docstring(head)
    return ""


def _markdown(head: str) -> str:
    """Front-matter ``title:``, else the first ``# `` heading."""
    if head.startswith("---\n"):
        end = head.find("\n---", 4)
        if end != -1:
            match = _FRONT_MATTER_TITLE.search(head, 4, end)
            if match:
                return match.group(1).strip("'\"")[:MAX_TITLE_CHARS]
    # str.find visits only lines opening with "#"; a MULTILINE regex would try a line
    # start at every position of a head with no heading.
    start = 0 if head.startswith("#") else (head.find("\n#") + 1 or -1)
    while start != -1:
        match = _HEADING.match(head, start)
        if match:
            return match.group(1)[:MAX_TITLE_CHARS]
        start = head.find("\n#", start) + 1 or -1
    return ""


def _restructured(head: str) -> str:
    """The first line of text underlined by a run of one punctuation character at
    least as long (an overline above it is allowed)."""
    lines = head.splitlines()
    for line, under in itertools.pairwise(lines):
        text = line.strip()
        if (
            text
            and not line[0].isspace()
            and not text.startswith("..")
            and not _ADORNMENT.fullmatch(text)
            and _ADORNMENT.fullmatch(under.rstrip())
            and len(under.rstrip()) >= len(text)
        ):
            return text[:MAX_TITLE_CHARS]
    return ""


def _docstring(head: str) -> str:
    """The first line of text of the module's docstring: the string that opens the
    file after its comments and blank lines."""
    match = _DOCSTRING.match(head)
    if match is None:
        return ""
    quote = match.group(1)
    end = head.find(quote, match.end())
    body = head[match.end() : end if end != -1 else len(head)]
    for line in body.splitlines():
        if line.strip():
            return line.strip()[:MAX_TITLE_CHARS]
    return ""
