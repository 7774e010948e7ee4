"""Cutting a document into the passages that are embedded: a few paragraphs of prose
under their heading, or a few blocks of code, each with its line range.

Why passages and not files: a small embedding model reads about 256 word pieces and
a file's meaning is spread over its sections; a hit from the vector side then points
at the passage that matched (its lines), as a word hit points at its best passage.

Each chunk is keyed by a hash of exactly the text the model reads. The vector store
keeps vectors by that key, so an edit re-embeds only the chunks whose text changed,
and a moved or copied file re-embeds nothing (the path is not part of the text).

A passage with no words of its own (a heading with nothing under it, a rule of dashes,
a lone brace) is not a chunk: the model would read only the title and the heading, and
such a passage came out near any query it shares a topic with, ahead of the text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

TARGET_CHARS: Final = 1000
"""A chunk grows by whole blocks up to about this many characters: roughly the 256
word pieces a MiniLM-sized model reads of English or code (longer text is cut off by
the model, so a bigger chunk would not be read in full)."""
MAX_CHUNKS: Final = 256
"""Per file: a 100-page file is embedded by its first MAX_CHUNKS passages. Bounds the
work one giant file asks of a 2-core machine."""
MAX_LINE_CHARS: Final = 4 * TARGET_CHARS
"""A longer line (minified code, a base64 blob) is cut to this; the model reads less."""
PROSE_EXTENSIONS: Final = frozenset({".md", ".markdown", ".txt", ".rst", ".org", ".adoc", ""})
MIN_LETTERS: Final = 6
"""A passage needs this many letters (any script) besides its heading to be embedded:
``Summary`` over a row of dashes has none, ``Fix the bug`` has nine."""
VERSION: Final = 2
"""The rule that cuts passages. Files embedded under another rule are cut again when
the daemon starts (their unchanged passages keep their vectors: nothing is computed)."""

_MD_HEADING = re.compile(r"#{1,6}\s+(\S.*)")
_RST_UNDERLINE = re.compile(r"([=\-~^\"'`#*+<>])\1{2,}\s*")


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int
    """First line, 1-based."""
    end: int
    """Last line, inclusive."""
    text: str
    """What the model reads: the document's title and the section heading (when the
    passage does not start with them), then the passage."""
    key: bytes
    """16 bytes of BLAKE2b over ``text``."""


def key_of(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class _Block:
    start: int
    end: int
    lines: list[str]
    heading: str
    """The heading this block sits under ("" before the first one, or in code)."""
    starts_section: bool

    @property
    def chars(self) -> int:
        return sum(len(line) + 1 for line in self.lines)


def split(relpath: str, title: str, text: str) -> list[Chunk]:
    """The chunks of a document (``title`` as the index holds it; "" for none)."""
    dot = relpath.rfind(".")
    ext = relpath[dot:].lower() if dot > relpath.rfind("/") else ""
    prose = ext in PROSE_EXTENSIONS
    blocks = _blocks(text.splitlines(), prose)
    chunks: list[Chunk] = []
    for group in _pack(blocks):
        lines = [line for block in group for line in block.lines]
        passage = "\n".join(lines).strip()
        own = lines[1:] if group[0].starts_section else lines
        if sum(c.isalpha() for line in own for c in line) < MIN_LETTERS:
            continue  # a heading alone, a rule: nothing of its own to mean
        first_line = passage.partition("\n")[0]
        heading = "" if group[0].starts_section else group[0].heading
        head = [h for h in (title, heading) if h and h not in first_line]
        body = "\n".join([*dict.fromkeys(head), passage])
        chunks.append(Chunk(group[0].start, group[-1].end, body, key_of(body)))
        if len(chunks) >= MAX_CHUNKS:
            break
    return chunks


def _blocks(lines: list[str], prose: bool) -> list[_Block]:
    """Runs of non-blank lines; in prose a heading line begins a block of its own kind
    (a new section), and the lines after it know it."""
    blocks: list[_Block] = []
    heading = ""
    current: _Block | None = None
    for number, raw in enumerate(lines, 1):
        line = raw[:MAX_LINE_CHARS].rstrip()
        found = _heading(line, lines, number) if prose else None
        if found is not None:
            heading = found
            current = _Block(number, number, [line], heading, starts_section=True)
            blocks.append(current)
            continue
        if not line.strip():
            current = None
            continue
        for piece in _pieces(line):
            if current is None or current.chars + len(piece) > TARGET_CHARS:
                current = _Block(number, number, [], heading, starts_section=False)
                blocks.append(current)
            current.lines.append(piece)
            current.end = number
    return blocks


def _pieces(line: str) -> list[str]:
    """A line in pieces of at most TARGET_CHARS, cut after a sentence or at a space
    where it can be: a paragraph written as one long line is read whole, not only
    its first 256 word pieces."""
    pieces: list[str] = []
    while len(line) > TARGET_CHARS:
        cut = line.rfind(". ", TARGET_CHARS // 2, TARGET_CHARS) + 1
        if cut <= 0:
            cut = line.rfind(" ", TARGET_CHARS // 2, TARGET_CHARS)
        if cut <= 0:
            cut = TARGET_CHARS
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    if line:
        pieces.append(line)
    return pieces


def _heading(line: str, lines: list[str], number: int) -> str | None:
    """The heading text if ``line`` (1-based ``number``) is a Markdown ``#`` heading or
    an underlined reStructuredText title; else None."""
    match = _MD_HEADING.fullmatch(line)
    if match:
        return match.group(1).strip().rstrip("#").strip()
    if number < len(lines) and line.strip() and _RST_UNDERLINE.fullmatch(lines[number]):
        return line.strip()
    return None


def _pack(blocks: list[_Block]) -> list[list[_Block]]:
    """Consecutive blocks grouped up to TARGET_CHARS; a new section starts a new group,
    and a heading is never a passage alone (it goes with the block after it)."""
    groups: list[list[_Block]] = []
    size = 0
    for block in blocks:
        heading_alone = bool(groups) and len(groups[-1]) == 1 and groups[-1][0].starts_section
        fits = size + block.chars <= TARGET_CHARS
        if groups and not block.starts_section and (fits or heading_alone):
            groups[-1].append(block)
            size += block.chars
            continue
        groups.append([block])
        size = block.chars
    return groups
