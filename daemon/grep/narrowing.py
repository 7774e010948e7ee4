"""What a grep asks of the index: the trigrams and words every match holds, and the
changes not indexed yet, whose files it reads whatever the index says.

The backend finds the files they admit (``Index.candidates``); ``trigrams`` and
``phrases`` take the pattern apart.
"""

from __future__ import annotations

import os
from typing import Final

from kbindex.daemon.grep import phrases, trigrams
from kbindex.daemon.index.values import PENDING_PATHS
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.watching.changes import Changes

TRIGRAMS_BESIDE_WORDS: Final = 6
"""Trigrams asked of a literal whose words are asked too (``trigrams.spread``)."""


def required(
    pattern: str, *, fixed: bool, ignore_case: bool, word: bool
) -> tuple[trigrams.Query, phrases.Words | None]:
    """What every file with a match holds: trigrams, and a literal's words in a row
    (``phrases``). The words narrow the files as much as the trigrams within them, so
    beside them a few trigrams are asked (the literal's edges, and files ``unless``
    admits whatever their words)."""
    query = trigrams.required(pattern, fixed=fixed, ignore_case=ignore_case)
    words = phrases.required(pattern, fixed=fixed, word=word, ignore_case=ignore_case)
    if words is not None:
        query = trigrams.spread(query, pattern, TRIGRAMS_BESIDE_WORDS)
    return query, words


def pending(changes: Changes | None, rules: IgnoreRules) -> tuple[list[str], list[tuple[str, str]]]:
    """Paths with changes not indexed yet, and of them the files that exist and the
    rules admit (path, relpath), at most PENDING_PATHS checked: grep reads them whatever
    the index says (past the bound, ``candidates`` reads every file anyway)."""
    found = changes.pending() if changes else []
    new: list[tuple[str, str]] = []
    for root, path in found[:PENDING_PATHS]:
        ruled_out = path == root or not os.path.isfile(path)
        if not ruled_out and rules.explain(root, path) is None:
            new.append((path, path[len(root) + 1 :]))
    return [p for _, p in found], new
