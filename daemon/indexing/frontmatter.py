"""A Markdown file's front matter, tags and dates, as filterable fields.

Front matter is the YAML block between a first line ``---`` and the next ``---`` (or
``...``) line. It is read with PyYAML's safe loader, which builds only plain values
(no Python objects), behind limits on its size, nesting and number of nodes, and with
aliases refused: an alias repeats a node by reference, so a few lines can stand for an
exponential tree (the "billion laughs") once the values are walked. A block past a
limit, or one that does not parse, yields no fields and a ``problem`` naming why; the
file is indexed as usual.

Fields are flat ``(key, value)`` pairs: a nested mapping's keys are joined with ``.``
(``author.name``), a list gives one pair per item, every value is text (a date as its
ISO form). Tags come from ``tags:`` (a list, or text split on commas and spaces) and
from ``#tag`` words in the text outside code and links; they are kept lower case,
without the ``#``, as Obsidian matches them. Dates are the front matter's ``created``,
``date`` and ``updated`` that read as dates, as POSIX seconds (UTC for a date or a
naive time).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Final

import yaml
from kbindex.daemon.index.plan import DATE_KEYS
from kbindex.daemon.index.values import FrontMatter

MAX_BYTES: Final = 64 << 10
"""Front matter longer than this is not read (notes' front matter is a few lines)."""
MAX_DEPTH: Final = 8
MAX_NODES: Final = 2000
MAX_FIELDS: Final = 200
MAX_VALUE_CHARS: Final = 200
"""A longer value is kept cut to this length: fields are matched whole, not searched."""
MAX_TAGS: Final = 200
MARKDOWN: Final = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})

_OPEN = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n")
_CLOSE = re.compile(r"(?m)^(?:---|\.\.\.)[ \t]*\r?$")
_FENCE = re.compile(r"(?m)^[ \t]{0,3}(```|~~~)[^\n]*\n.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(
    r"\]\([^)\s]*\)|<[a-z][a-z0-9+.-]*:[^>\s]*>|[a-z][a-z0-9+.-]*://\S*", re.I
)
# A tag starts after a space or the start of a line (not a URL's fragment, not an HTML
# entity), holds letters, digits, ``_ - /``, and is not all digits (``#1`` is an issue).
_TAG = re.compile(r"(?<![^\s(\[,;])#([\w/-]*[^\W\d][\w/-]*)")

# The C parser where PyYAML was built with libyaml: the same results, faster.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def block(text: str) -> tuple[str, int] | None:
    """The front matter's YAML text and where the body after it starts, or None when the
    text does not open with a front matter block."""
    opened = _OPEN.match(text)
    if opened is None:
        return None
    closed = _CLOSE.search(text, opened.end())
    if closed is None:
        return None
    end = text.find("\n", closed.end())
    return text[opened.end() : closed.start()], len(text) if end < 0 else end + 1


def read(text: str, name: str) -> FrontMatter:
    """The front matter, tags and dates of the text of the file ``name`` (only Markdown
    has them; another file gives an empty value)."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    if suffix not in MARKDOWN:
        return FrontMatter()
    found = block(text)
    body = text if found is None else text[found[1] :]
    values: Any = None
    problem = ""
    if found is not None:
        try:
            values = load(found[0])
        except ValueError as exc:
            problem = f"front matter not read: {exc}"
    fields = flatten(values) if isinstance(values, dict) else []
    if values is not None and not isinstance(values, dict) and not problem:
        problem = "front matter not read: it is not a mapping of keys to values"
    tags = dict.fromkeys([*_listed_tags(values), *text_tags(body)])
    return FrontMatter(
        tuple(fields[:MAX_FIELDS]),
        tuple(list(tags)[:MAX_TAGS]),
        _dates(values),
        problem,
    )


def load(source: str) -> Any:
    """``source`` as YAML plain values; ValueError names what is wrong with it."""
    if len(source.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ValueError(f"longer than {MAX_BYTES // 1024} KiB")
    depth = nodes = 0
    try:
        # The events first: nesting, size and aliases are checked before any value is
        # built from them.
        for event in yaml.parse(source, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                raise ValueError("aliases (*name) are not read")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise ValueError(f"more than {MAX_NODES} values")
        return yaml.load(source, Loader=_Loader)  # a safe loader: plain values only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        reason = getattr(exc, "problem", None) or type(exc).__name__
        raise ValueError(f"invalid YAML{where}: {reason}") from None


def flatten(values: dict[Any, Any], prefix: str = "") -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of a mapping (see the module's docstring); null
    values and empty lists give none."""
    pairs: list[tuple[str, str]] = []
    for key, value in values.items():
        name = f"{prefix}{_text(key)}"
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                pairs.extend(flatten(item, f"{name}."))
            elif item is not None and not isinstance(item, list):
                pairs.append((name, _text(item)[:MAX_VALUE_CHARS]))
    return pairs


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value).strip()


def text_tags(text: str) -> list[str]:
    """The ``#tags`` of a Markdown text, lower case, in order of first appearance; none
    from code (fenced blocks, inline code) or from links and URLs."""
    if "#" not in text:
        return []
    plain = _LINK_TARGET.sub(" ", without_code(text))
    return [tag.lower().strip("/") for tag in _TAG.findall(plain) if tag.strip("/-")]


def without_code(text: str) -> str:
    """``text`` with its fenced code blocks and inline code blanked out, each line where
    it was (so offsets still give line numbers)."""
    if "`" not in text and "~~~" not in text:
        return text
    text = _FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    return _INLINE_CODE.sub(lambda m: " " * len(m.group()), text)


def _listed_tags(values: Any) -> list[str]:
    if not isinstance(values, dict):
        return []
    listed = values.get("tags", values.get("tag"))
    if isinstance(listed, str):
        listed = re.split(r"[,\s]+", listed)
    if not isinstance(listed, list):
        return []
    tags = (_text(t).lower().lstrip("#") for t in listed if isinstance(t, str | int | float))
    return [t for t in tags if t]


def _dates(values: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(values, dict):
        return ()
    found = []
    for key in DATE_KEYS:
        when = as_time(values.get(key))
        if when is not None:
            found.append((key, when))
    return tuple(found)


def as_time(value: Any) -> float | None:
    """A front matter value (a YAML date or time, or ISO text) as POSIX seconds; None
    when it is not one."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return float(value.timestamp())
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    return None
