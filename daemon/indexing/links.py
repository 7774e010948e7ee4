"""The links of a Markdown file: ``[text](target)``, reference definitions
(``[ref]: target``) and ``[[wikilinks]]``, each resolved to a path relative to the root.

An inline or reference link is resolved against the linking file's directory (``/x``
against the root), its ``#fragment`` and ``?query`` dropped, percent escapes decoded.
One that leaves the root, an external URL (any ``scheme:``, ``//host``) and a link to a
place in the same file (``#x``) are left out: they name no file of the root.

A wikilink names a note the way Obsidian does: ``[[Note]]``, ``[[folder/Note]]``,
``[[Note#Heading|shown text]]``; without an extension it means ``Note.md``. Which file
it is depends on the whole root (Obsidian takes any file of that name), so it is kept
as written (``wiki``) and the index resolves it when asked: a note added later, or
moved, is found by its name.

Links inside code (fenced blocks, inline code) are not links.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final
from urllib.parse import unquote

from kbindex.daemon.index.values import Link
from kbindex.daemon.indexing.frontmatter import MARKDOWN, without_code

MAX_LINKS: Final = 1000
MAX_TEXT_CHARS: Final = 200

_INLINE = re.compile(r"!?\[([^\]\n]*)\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+[\"'(][^)\n]*)?\)")
_DEFINITION = re.compile(r"(?m)^[ \t]{0,3}\[([^\]\n]+)\]:[ \t]*(<[^>\n]*>|\S+)")
_WIKI = re.compile(r"!?\[\[([^\]\n|#]*)(#[^\]\n|]*)?(?:\|([^\]\n]*))?\]\]")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def of_text(text: str, relpath: str) -> list[Link]:
    """The links of the file at ``relpath`` (relative to its root) holding ``text``, in
    the order they appear; only Markdown files have links."""
    suffix = posixpath.splitext(relpath)[1].lower()
    if suffix not in MARKDOWN or ("](" not in text and "[[" not in text and "]:" not in text):
        return []
    plain = without_code(text)
    found: list[tuple[int, Link]] = []
    for match in _INLINE.finditer(plain):
        target = resolve(match.group(2), relpath)
        if target is not None:
            found.append((match.start(), Link(target, _shown(match.group(1)), 0)))
    for match in _DEFINITION.finditer(plain):
        target = resolve(match.group(2), relpath)
        if target is not None:
            found.append((match.start(), Link(target, _shown(match.group(1)), 0)))
    for match in _WIKI.finditer(plain):
        name = match.group(1).strip()
        if not name:
            continue  # [[#Heading]]: a place in this file
        if not posixpath.splitext(name)[1]:
            name += ".md"
        shown = match.group(3) if match.group(3) is not None else match.group(1)
        found.append((match.start(), Link(name.lstrip("/"), _shown(shown), 0, wiki=True)))
    found.sort(key=lambda item: item[0])
    links = []
    line, at = 1, 0
    for offset, link in found[:MAX_LINKS]:
        line += plain.count("\n", at, offset)
        at = offset
        links.append(Link(link.target, link.text, line, link.wiki))
    return links


def resolve(target: str, relpath: str) -> str | None:
    """A Markdown link's target as a path relative to the root, for a link in the file
    at ``relpath``; None when it names no file of the root (see the module)."""
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1].strip()
    if not target or target.startswith(("#", "//")) or _SCHEME.match(target):
        return None
    target = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not target:
        return None
    if target.startswith("/"):
        joined = target.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(relpath), target)
    resolved = posixpath.normpath(joined)
    if resolved == "." or resolved == ".." or resolved.startswith("../"):
        return None
    return resolved


def _shown(text: str) -> str:
    return " ".join(text.split())[:MAX_TEXT_CHARS]
