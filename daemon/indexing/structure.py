"""What a file's text holds besides its words, as the index keeps it for filters and
links: its front matter's fields, tags and dates (``frontmatter``) and its links
(``links``), or the front matter of Org, reStructuredText and AsciiDoc files
(``headers``); its kind comes from its path alone (``kinds``). Computed in the indexer's
reader thread with the rest of a ``index.values.Document``, and again from the new path
when a file moves (a relative link means another file from another folder)."""

from __future__ import annotations

import posixpath

from kbindex.daemon.index.values import Structure
from kbindex.daemon.indexing import frontmatter, headers, links


def of(relpath: str, text: str) -> Structure:
    """The structure of the file at ``relpath`` (relative to its root) holding ``text``:
    its front matter from Markdown's YAML, or from the headers of the formats that
    have a convention for one (``headers``)."""
    front = headers.read(text, posixpath.splitext(relpath)[1].lower())
    if front is None:
        front = frontmatter.read(text, relpath)
    return Structure(front, tuple(links.of_text(text, relpath)))
