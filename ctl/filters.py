"""The filter options shared by ``kbctl search``, ``grep`` and ``files`` (issue 41):
what a file holds besides its words. The daemon reads the values and says what is
wrong with one; kbctl only collects them."""

from __future__ import annotations

import argparse
from typing import Any, Final

VALUED: Final = frozenset({"--kind", "--tag", "--field", "--modified", "--date", "--scope"})
"""The options that take a value (for ``search_argv``)."""


def add(p: argparse.ArgumentParser, *, modified: bool = True) -> None:
    """The filter options (``modified``: with ``--modified``)."""
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        help="only files of this kind (repeatable: any): doc, code, test, config, data,"
        " generated, changelog, vendored, other",
    )
    p.add_argument(
        "--tag", action="append", default=[], help="only files with this #tag (repeatable: all)"
    )
    p.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only files whose front matter has KEY: VALUE (repeatable: all)",
    )
    if modified:
        p.add_argument(
            "--modified",
            metavar="SPAN",
            help="only files modified in SPAN: 7d, '2 weeks', 2024-05, 2024-01..2024-03, ..2023",
        )
    p.add_argument(
        "--date",
        action="append",
        default=[],
        metavar="[KEY:]SPAN",
        help="only files with a front matter date (created, date, updated) in SPAN",
    )
    p.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="NAME",
        help="only files of the root named NAME (repeatable: any)",
    )


def values(args: argparse.Namespace) -> dict[str, Any]:
    """The request fields of the filter options given."""
    return {
        "kind": args.kind,
        "tag": args.tag,
        "field": args.field,
        "modified": getattr(args, "modified", None),
        "date": args.date,
        "scope": args.scope,
    }
