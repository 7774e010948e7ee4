"""The ``where`` argument of search, grep and find_files: every filter of issue 41 in one
short string, so that tools/list stays within its budget (one parameter, described
once, instead of six per tool).

``kind:doc tag:project status=draft modified:7d created:2024 scope:notes``: terms apart
by spaces (quote one holding spaces: ``"owner=Ann Lee"``); ``kind:``, ``tag:`` and
``scope:`` as the request's fields, ``KEY=VALUE`` a front matter field, ``modified:``
a span of the modified time, ``date:`` (any), ``created:`` or ``updated:`` a front
matter date's. search also takes ``prefer:recent`` (recent files first: a score halves
every half-life of age, the daemon's setting or 90 days; ``prefer:recent:30d`` names
it). The daemon reads the values and says what is wrong with one.

find_files also takes ``links:PATH`` (the files PATH links to) or ``linked-from:PATH``
(the files that link to it), alone: ``links.py`` answers them.
"""

from __future__ import annotations

import shlex
from typing import Any

from kbindex.mcpfront.arguments import ArgumentError
from kbindex.mcpfront.links import TERMS

_LISTED = {"kind": "kind", "tag": "tag", "scope": "scope"}
_DATED = ("created", "updated")
_NAMES = {
    "kind": "kind:doc",
    "tag": "tag:project",
    "scope": "scope:notes",
    "modified": "modified:7d",
    "date": "date:2024",
    "created": "created:2024-05",
    "updated": "updated:30d..",
    "prefer": "prefer:recent",
}
"""Each term's name, with an example of it for a message."""


def filters(where: str | None, *, ranked: bool = False) -> dict[str, Any]:
    """The request fields (``proto.messages.Filtered``) of a ``where`` string; with
    ``ranked`` (search), also ``prefer:recent`` (``Search.recent``)."""
    terms = _terms(where)
    if not terms:
        return {}
    found: dict[str, Any] = {"kind": [], "tag": [], "field": [], "date": [], "scope": []}
    for term in terms:
        name, colon, value = term.partition(":")
        name = name.lower()
        if colon and not value and name in _NAMES:
            raise ArgumentError(f"The term {term!r} of 'where' needs a value, like {_NAMES[name]}.")
        if colon and "=" not in name and value:
            if name in _LISTED:
                found[_LISTED[name]].append(value)
                continue
            if name == "modified":
                if "modified" in found:
                    raise ArgumentError(
                        "The term modified: goes once in 'where'; give a span instead,"
                        " like modified:2024-01..2024-03."
                    )
                found["modified"] = value
                continue
            if name == "date":
                found["date"].append(value)
                continue
            if name in _DATED:
                found["date"].append(f"{name}:{value}")
                continue
            if name == "prefer" and value.partition(":")[0] == "recent":
                if not ranked:
                    raise ArgumentError("The term prefer:recent of 'where' works in search only.")
                found["recent"] = value.partition(":")[2] or "on"
                continue
        if "=" in term:
            found["field"].append(term)
            continue
        if colon and name in TERMS:
            raise ArgumentError(f"The term {name}: of 'where' works in find_files only, alone.")
        raise ArgumentError(
            f"The term {term!r} of 'where' is not a filter: use kind:, tag:, scope:,"
            " modified:, created:, updated:, date:, KEY=VALUE or (search) prefer:recent."
        )
    return found


def linked(where: str | None) -> tuple[str, bool] | None:
    """The path and the direction (True: the files that link to it) of a ``links:`` or
    ``linked-from:`` term, or None when ``where`` has none."""
    terms = _terms(where)
    for term in terms:
        name, colon, value = term.partition(":")
        if colon and name in TERMS:
            if len(terms) > 1:
                raise ArgumentError(f"The term {name}: of 'where' goes alone, with no other.")
            if not value:
                raise ArgumentError(f"The term {name}: of 'where' needs a path: {name}:notes/a.md.")
            return value, TERMS[name]
    return None


def _terms(where: str | None) -> list[str]:
    if not where or not where.strip():
        return []
    try:
        return shlex.split(where)
    except ValueError as exc:
        raise ArgumentError(f"The argument 'where' cannot be read: {exc}.") from None
