"""The front matter of the text formats that have their own convention for it, read into
the same fields, tags and dates as Markdown's YAML (``frontmatter``):

- Org-mode: the ``#+KEY: value`` lines that open the file (``#+TITLE:``, ``#+DATE:``,
  ``#+FILETAGS: :a:b:``), comments and blank lines between them;
- reStructuredText: the docinfo, a field list first in the document or right after its
  title (``:Date: 2024-05-01``, ``:Tags: a, b``; a value may go on over indented lines);
- AsciiDoc: the header's attribute entries (``:keywords: a, b``, ``:revdate: 2024-05-01``)
  around the ``= Title`` line and its author and revision lines, up to the first blank
  line after the title.

Keys are lower case. Tags come from ``FILETAGS`` (Org), ``tags`` (reStructuredText and
AsciiDoc) and ``keywords`` (AsciiDoc), split on ``:``, commas and spaces. The dates are
``created``, ``date`` and ``updated`` as in Markdown, with AsciiDoc's ``revdate`` as
``updated``; an Org timestamp (``<2024-05-01 Wed>``) reads as its date. The header is
read within the first ``frontmatter.MAX_BYTES``; one longer than that, or a date key
whose value is not an ISO date, is a problem reported for the file, which is indexed
as usual with what was read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from kbindex.daemon.index.plan import DATE_KEYS
from kbindex.daemon.index.values import FrontMatter
from kbindex.daemon.indexing.frontmatter import (
    MAX_BYTES,
    MAX_FIELDS,
    MAX_TAGS,
    MAX_VALUE_CHARS,
    as_time,
)

_ORG_LINE = re.compile(r"^#\+([A-Za-z][\w-]*):[ \t]*(.*)$")
_FIELD = re.compile(r"^:([^:\s][^:]*):(?:[ \t]+(.*))?$")
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_ORG_TIMESTAMP = re.compile(
    r"^[<\[]?(\d{4}-\d{2}-\d{2})(?:[ \t]+[A-Za-z.]+)?([ \t]+\d{1,2}:\d{2})?"
)
_TAG_SPLIT = re.compile(r"[:,\s]+")
_TAG_KEYS: Final = frozenset({"filetags", "tags", "keywords"})
_DATE_ALIASES: Final = {"revdate": "updated"}

Pairs = list[tuple[str, str]]
Header = tuple[Pairs, bool]
"""The header's ``(key, value)`` pairs, and whether it ended before the text did."""


def read(text: str, suffix: str) -> FrontMatter | None:
    """The front matter of a file with the extension ``suffix`` holding ``text``, or
    None when the format has no convention for one here."""
    reader = READERS.get(suffix)
    if reader is None:
        return None
    head = text
    if len(text) > MAX_BYTES:
        # Whole lines only: a line cut short is neither a header line nor the body's.
        head = text[: text.rfind("\n", 0, MAX_BYTES) + 1]
    pairs, ended = reader(head)
    cleaned = [(key.strip().lower(), " ".join(value.split())) for key, value in pairs]
    return _front(cleaned, complete=ended or len(text) <= MAX_BYTES)


def _front(pairs: Pairs, *, complete: bool) -> FrontMatter:
    fields: list[tuple[str, str]] = []
    tags: dict[str, None] = {}
    dates: dict[str, float] = {}
    problems = [] if complete else [f"header longer than {MAX_BYTES // 1024} KiB"]
    for key, value in pairs:
        if not value:
            continue
        fields.append((key, value[:MAX_VALUE_CHARS]))
        if key in _TAG_KEYS:
            tags.update((t.lower().lstrip("#"), None) for t in _TAG_SPLIT.split(value) if t)
        name = _DATE_ALIASES.get(key, key)
        if name in DATE_KEYS and name not in dates:
            when = _time(value)
            if when is None:
                problems.append(f"{key} {value[:40]!r} is not an ISO date")
            else:
                dates[name] = when
    tags.pop("", None)
    problem = f"front matter not fully read: {'; '.join(problems)}" if problems else ""
    return FrontMatter(
        tuple(fields[:MAX_FIELDS]),
        tuple(list(tags)[:MAX_TAGS]),
        tuple((k, dates[k]) for k in DATE_KEYS if k in dates),
        problem,
    )


def _time(value: str) -> float | None:
    stamp = _ORG_TIMESTAMP.match(value)
    if stamp is not None:
        value = stamp.group(1) + ("T" + stamp.group(2).strip().zfill(5) if stamp.group(2) else "")
    return as_time(value)


def _org(text: str) -> Header:
    pairs: Pairs = []
    for line in text.splitlines():
        found = _ORG_LINE.match(line)
        if found is not None:
            pairs.append((found.group(1), found.group(2)))
        elif line.strip() and not line.startswith("# ") and line.strip() != "#":
            return pairs, True  # the first line of the body
    return pairs, False


def _rst(text: str) -> Header:
    lines = text.splitlines()
    at = _past_blank(lines, 0)
    at = _past_blank(lines, _past_rst_title(lines, at))
    pairs: Pairs = []
    for line in lines[at:]:
        found = _FIELD.match(line)
        if found is not None:
            pairs.append((found.group(1), found.group(2) or ""))
        elif pairs and line[:1] in (" ", "\t") and line.strip():
            key, value = pairs[-1]
            pairs[-1] = (key, f"{value} {line.strip()}")  # a value that goes on, indented
        else:
            return pairs, True
    return pairs, False


def _past_rst_title(lines: list[str], at: int) -> int:
    """Past a section title (text underlined, or over- and underlined) at ``at``, or
    ``at`` when there is none."""
    window = lines[at : at + 3]
    if len(window) >= 3 and _RST_ADORNMENT.match(window[0]) and _RST_ADORNMENT.match(window[2]):
        return at + 3
    if len(window) >= 2 and window[0].strip() and _RST_ADORNMENT.match(window[1]):
        return at + 2
    return at


def _past_blank(lines: list[str], at: int) -> int:
    while at < len(lines) and not lines[at].strip():
        at += 1
    return at


def _adoc(text: str) -> Header:
    pairs: Pairs = []
    titled = False
    after_title = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            continue  # a comment line
        if not stripped:
            if titled:
                return pairs, True  # the header ends at the first blank line after the title
            continue
        found = _FIELD.match(stripped)
        if found is not None:
            pairs.append((found.group(1).strip("!"), found.group(2) or ""))
        elif not titled and line.startswith("= "):
            titled = True
        elif titled and after_title < 2:
            after_title += 1  # the author and revision lines
        else:
            return pairs, True
    return pairs, False


READERS: Final[dict[str, Callable[[str], Header]]] = {
    ".org": _org,
    ".rst": _rst,
    ".rest": _rst,
    ".adoc": _adoc,
    ".asciidoc": _adoc,
    ".asc": _adoc,
}
