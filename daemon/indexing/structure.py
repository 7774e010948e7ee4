"""What a file's text holds besides its words, as the index keeps it for filters and
links: its front matter's fields, tags and dates (``frontmatter``) and its links
(``links``); its kind comes from its path alone (``kinds``). Computed in the indexer's
reader thread with the rest of a ``index.values.Document``, and again from the new path
when a file moves (a relative link means another file from another folder)."""

from __future__ import annotations

from kbindex.daemon.index.values import Structure
from kbindex.daemon.indexing import frontmatter, links


def of(relpath: str, text: str) -> Structure:
    """The structure of the file at ``relpath`` (relative to its root) holding ``text``."""
    return Structure(frontmatter.read(text, relpath), tuple(links.of_text(text, relpath)))
