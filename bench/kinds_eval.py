"""Kinds in ranking (issue 41): do code-and-docs questions find the documentation and
the source first, when the same words fill changelogs, generated copies and vendored
libraries?

Builds a tree under /tmp from this repository as it is: ``README.md``, ``docs/``,
``daemon/``, ``proto/``, ``ctl/``, ``mcpfront/`` (docs and code), ``tests/`` (tests),
``changelog/`` (the commit messages of ``git log``, ten commits per file: changelogs),
``build/lib/`` (a copy of ``daemon/``: generated) and ``vendor/`` (anyio and watchdog
from the virtualenv: vendored). Indexes it with the daemon's own ``SqliteIndex`` (the
kinds from the default rules) and runs QUERIES through ``to_plan`` and the
index's search, without and with the default kind boosts, each query's expected files
judged relevant. Prints MRR, nDCG@10, hits in the top 5 and the share of the top 10
that are changelog, generated or vendored, for each.

    .venv/bin/python bench/kinds_eval.py [--json OUT]
    .venv/bin/python bench/kinds_eval.py --scifact   # what the boosts cost a search

``--scifact`` indexes BEIR SciFact (every file a doc: the boosts change no ranking)
with ``SqliteIndex`` in-process and runs its 809 train questions (limit 100) through the
same index without and with the default boosts, alternating per question in both
orders so that load falls on both alike: the p50 and p99 of each, and whether the
rankings are the same.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import common
from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.indexing.kinds import DEFAULT_BOOSTS, Classifier
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import hits as searching
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts

KINDS = Classifier()

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("README.md", "docs", "daemon", "proto", "ctl", "mcpfront", "tests")
VENDORED = ("anyio", "watchdog")
COMMITS_PER_FILE = 10
LIMIT = 10

QUERIES: dict[str, tuple[str, ...]] = {
    "rebuild a damaged index file moved aside": (
        "daemon/recovery.py",
        "daemon/backends/sqlite/database.py",
        "docs/internals.md",
    ),
    "inotify watch limit fall back to polling": (
        "daemon/watching/inotify.py",
        "daemon/watching/watcher.py",
        "docs/indexing.md",
    ),
    "ripgrep version and flags": ("daemon/grep/ripgrep.py", "docs/grep.md"),
    "write a note with if_match content hash": (
        "daemon/notes/notes.py",
        "docs/notes.md",
        "daemon/notes/notefile.py",
    ),
    "install the systemd user service": ("docs/service.md", "ctl/service.py"),
    "frame length prefix maximum size": ("proto/framing.py", "docs/protocol.md"),
    "fuse words and meaning in hybrid search": (
        "daemon/searching/hybrid.py",
        "docs/meaning.md",
    ),
    "kbignore negation gitignore rules": ("daemon/indexing/ignore.py", "docs/indexing.md"),
    "each machine deletes only its own rows in postgres": (
        "docs/postgres.md",
        "daemon/backends/postgres/index.py",
    ),
    "trigram index narrows grep candidates": (
        "daemon/grep/trigrams.py",
        "docs/grep.md",
        "daemon/backends/sqlite/candidates.py",
    ),
    "prefix query on the unstemmed vocabulary": (
        "daemon/backends/sqlite/prefixes.py",
        "docs/search.md",
    ),
    "task group cancel scope shielded cleanup": ("daemon/app.py", "daemon/serving/server.py"),
    "file system events observer thread": (
        "daemon/watching/watcher.py",
        "daemon/watching/router.py",
    ),
    "front matter tags yaml safe load": ("daemon/indexing/frontmatter.py", "docs/kbctl.md"),
}


def build(root: Path) -> dict[str, int]:
    """The tree (see the module); returns how many files of each part."""
    counts: dict[str, int] = {}
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, root / name)
    shutil.copytree(
        REPO / "daemon",
        root / "build" / "lib" / "daemon",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    for name in VENDORED:
        shutil.copytree(
            site / name,
            root / "vendor" / name,
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
    log = subprocess.run(
        ["git", "-C", str(REPO), "log", "--format=## %h %s%n%n%b"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    entries = [e for e in log.split("\n## ") if e.strip()]
    (root / "changelog").mkdir()
    for i in range(0, len(entries), COMMITS_PER_FILE):
        text = "\n## ".join(entries[i : i + COMMITS_PER_FILE])
        (root / "changelog" / f"{i // COMMITS_PER_FILE:04}.md").write_text(f"## {text}\n")
    for part in ("changelog", "build", "vendor", *SOURCES):
        counts[part] = sum(len(f) for _, _, f in os.walk(root / part)) or 1
    return counts


def index(root: Path, db: Path) -> SqliteIndex:
    idx = SqliteIndex(db, Texts(Roots((root,))).current)
    idx.open()
    common.index_roots(idx, [root], max_bytes=10 << 20)
    return idx


def evaluate(idx: SqliteIndex, root: Path, boosts: dict[str, float]) -> dict[str, Any]:
    """The questions' rankings with each kind's factor in ``boosts``."""
    reciprocal, ndcg, top5, unwanted, per_query = [], [], 0, 0, {}
    factors = Classifier(boosts=boosts).boosts
    for query, expected in QUERIES.items():
        plan = replace(to_plan(query, limit=LIMIT), boosts=factors)
        hits = searching.search(idx, plan).hits
        ranked = [h.relpath for h in hits]
        first = next((i for i, r in enumerate(ranked) if r in expected), None)
        reciprocal.append(0.0 if first is None else 1 / (first + 1))
        dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(ranked) if r in expected)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(expected), LIMIT)))
        ndcg.append(dcg / ideal)
        top5 += first is not None and first < 5
        kinds = [KINDS.of(str(root), r) for r in ranked]
        unwanted += sum(k in ("changelog", "generated", "vendored") for k in kinds)
        per_query[query] = ranked[:3]
    n = len(QUERIES)
    return {
        "mrr": round(sum(reciprocal) / n, 4),
        "ndcg@10": round(sum(ndcg) / n, 4),
        "found_in_top5": f"{top5}/{n}",
        "changelog_generated_vendored_in_top10": round(unwanted / (n * LIMIT), 3),
        "top3": per_query,
    }


def scifact(work: Path) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    import eval_scifact

    root = work / "scifact"
    eval_scifact.write_corpus(eval_scifact.DATASET, root)
    questions = eval_scifact.read_queries(eval_scifact.DATASET, "train")
    idx = index(root, work / "scifact.sqlite3")
    boosted = {"no boosts": Classifier(boosts={}).boosts, "default boosts": Classifier().boosts}
    times: dict[str, list[float]] = {"no boosts": [], "default boosts": []}
    same = 0
    try:
        for n, text in enumerate(questions.values()):
            plan = to_plan(text, limit=100)
            ranked = {}
            order = ("no boosts", "default boosts")
            for name in order if n % 2 else reversed(order):
                began = time.perf_counter()
                hits = searching.search(idx, replace(plan, boosts=boosted[name])).hits
                times[name].append((time.perf_counter() - began) * 1000)
                ranked[name] = [h.relpath for h in hits]
            same += ranked["no boosts"] == ranked["default boosts"]
    finally:
        idx.close()

    def summary(values: list[float]) -> dict[str, float]:
        values = sorted(values)
        return {
            "p50_ms": round(values[len(values) // 2], 2),
            "p99_ms": round(values[int(len(values) * 0.99)], 2),
        }

    return {
        "questions": len(questions),
        "same_ranking": same,
        **{name: summary(v) for name, v in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--scifact", action="store_true", help="the boosts' cost on SciFact")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kinds-eval-", dir="/tmp"))
    if args.scifact:
        try:
            print(json.dumps(scifact(work), indent=2))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        root = work / "tree"
        root.mkdir()
        counts = build(root)
        results: dict[str, Any] = {"files": counts}
        for name, boosts in (("no boosts", {}), ("default boosts", DEFAULT_BOOSTS)):
            began = time.perf_counter()
            idx = index(root, work / f"{len(boosts)}.sqlite3")
            try:
                results[name] = evaluate(idx, root, dict(boosts)) | {
                    "seconds": round(time.perf_counter() - began, 1)
                }
            finally:
                idx.close()
        print(json.dumps(results, indent=2))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
