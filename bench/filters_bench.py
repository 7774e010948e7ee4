"""What a filter costs a search (issue 41), on one of two corpora indexed in-process with
``SqliteIndex`` (or ``PgIndex`` with ``--backend postgres``: a throwaway cluster from
bench/pgcluster.py), each a large root plus a small one of 200 files:

- ``notes`` (the default): 20,000 generated Markdown notes with front matter (tags,
  status, a created date); filtered by a tag, a field, a kind, a created date span, the
  modified time, a path and the small root's scope;
- ``bench``: bench/corpus.py's corpus (its defaults: 20,000 files, about 200 MB; made
  if missing), which has no front matter; filtered by kind, the modified time (the
  newer half), a path and the small root's scope.

Questions of two or three words are run unfiltered and with each filter
(``plan.Filters``), alternating, limit 10. Prints each filter's p50 and p99 and their
ratios to the unfiltered search's, and checks that the small root's scoped search fills
its limit.

    .venv/bin/python bench/filters_bench.py [--corpus notes|bench] [--notes 20000] [--files N]
        [--backend sqlite|postgres] [--keep DIR [--index-only]]

With ``--keep``, PostgreSQL's cluster keeps its data in DIR/pg and is started again from
it; each run first brings the schema to this checkout's version (``schema.migrate``), so
compare two versions of the backend on copies of DIR when the schema differs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import common
import corpus
import pgcluster
from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.index.plan import NO_FILTERS, DateRange, Filters, PathFilter
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import hits as searching
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts

WORDS = [f"w{n}" for n in range(3000)]
TAGS = [f"topic{n}" for n in range(50)]
QUESTIONS = 300
SMALL = 200
DAY = 86400.0
SCOPE = "small root (scope)"


def _note(rng: random.Random, i: int) -> str:
    words = " ".join(rng.choices(WORDS, weights=[1 / (r + 1) for r in range(len(WORDS))], k=150))
    tags = ", ".join(rng.sample(TAGS, 3))
    created = time.strftime("%Y-%m-%d", time.gmtime(1.7e9 - rng.randrange(1000) * DAY))
    status = rng.choice(["draft", "done", "review"])
    front = f"title: Note {i}\ntags: [{tags}]\nstatus: {status}\ncreated: {created}"
    return f"---\n{front}\n---\n# Note {i}\n{words}\n"


def _notes(
    work: Path, count: int, rng: random.Random, *, write: bool = True
) -> tuple[Path, Path, list[str]]:
    big, small = work / "big", work / "small"
    for root, n in ((big, count), (small, SMALL)) if write else ():
        for i in range(n):
            folder = root / f"d{i % 100}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"n{i}.md").write_text(_note(rng, i), encoding="utf-8")
    return big, small, WORDS[:600]


def _bench_corpus(work: Path, files: int) -> tuple[Path, Path, list[str]]:
    mb, seed = corpus.DEFAULT_MB * files / corpus.DEFAULT_FILES, corpus.DEFAULT_SEED
    out = corpus.default_out(files, mb, seed)
    manifest = corpus.build(out, files, mb, seed)
    corpus.build(work / "small", SMALL, mb * SMALL / files, seed + 1)
    return out, work / "small", list(manifest["queries"]["middle"])


def _newer_half(root: Path) -> float:
    """The median modification time under ``root``, in POSIX seconds."""
    times = sorted(
        os.stat(os.path.join(d, n)).st_mtime_ns for d, _, names in os.walk(root) for n in names
    )
    return times[len(times) // 2] / 1e9


def _filters(which: str, big: Path, small: Path) -> dict[str, Filters]:
    common_filters = {
        "kind": Filters(kinds=("code",) if which == "bench" else ("doc",)),
        "modified (newer half)": Filters(modified=DateRange(_newer_half(big), None)),
        "path": Filters(path=PathFilter.parse("area-05/" if which == "bench" else "d7/")),
        SCOPE: Filters(roots=(str(small),)),
    }
    if which == "bench":
        return common_filters
    return {
        "tag": Filters(tags=("topic7",)),
        "field": Filters(fields=(("status", "draft"),)),
        "created 2023": Filters(dated=(DateRange(1.672e9, 1.704e9, "created"),)),
        **common_filters,
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(common.percentile(values, 0.5), 2),
        "p99_ms": round(common.percentile(values, 0.99), 2),
    }


@contextmanager
def _index(backend: str, work: Path, roots: tuple[Path, Path], kept: bool) -> Iterator[Any]:
    """An opened index of ``backend`` in ``work`` (``.reused``: it holds one already)."""
    if backend == "sqlite":
        reused = (work / "index.sqlite3").exists()
        idx = SqliteIndex(work / "index.sqlite3", Texts(Roots(roots)).current)
        idx.open()
        try:
            yield idx, reused
        finally:
            idx.close()
        return
    import psycopg
    from kbindex.daemon.backends.postgres import schema
    from kbindex.daemon.backends.postgres.index import PgIndex

    with contextlib.ExitStack() as stack:
        if kept:
            dsn, reused = stack.enter_context(pgcluster.kept(work / "pg"))
        else:
            dsn, reused = stack.enter_context(pgcluster.databases(None)).fresh(), False
        with psycopg.connect(dsn, autocommit=True) as conn:
            schema.migrate(conn)
            if reused:
                conn.execute("VACUUM ANALYZE")  # as autovacuum leaves the tables in time
        idx = PgIndex(dsn, "bench")
        idx.open()
        try:
            yield idx, reused
        finally:
            idx.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("notes", "bench"), default="notes")
    parser.add_argument("--notes", type=int, default=20_000, help="large root's notes")
    parser.add_argument(
        "--files",
        type=int,
        default=corpus.DEFAULT_FILES,
        help="with --corpus bench: its files (its size in proportion)",
    )
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the files and the index in this folder, and reuse them when it holds"
        " them (to compare two versions of the searcher on one index)",
    )
    parser.add_argument(
        "--index-only", action="store_true", help="with --keep: make the index, measure nothing"
    )
    args = parser.parse_args()
    rng = random.Random(42)  # the questions: the same whether the notes are made or kept
    work = args.keep or Path(tempfile.mkdtemp(prefix="filters-bench-", dir="/tmp"))
    made = (work / "index.sqlite3").exists() or (work / "pg" / "data").exists()
    try:
        work.mkdir(parents=True, exist_ok=True)
        if args.corpus == "notes":
            big, small, words = _notes(work, args.notes, random.Random(41), write=not made)
        else:
            big, small, words = _bench_corpus(work, args.files)
        with _index(args.backend, work, (big, small), args.keep is not None) as (idx, reused):
            result = _measure(args, idx, reused, rng, big, small, words)
        if result:
            print(json.dumps(result, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _measure(
    args: argparse.Namespace,
    idx: Any,
    reused: bool,
    rng: random.Random,
    big: Path,
    small: Path,
    words: list[str],
) -> dict[str, Any] | None:
    """Index (unless ``reused``) and time the questions: the JSON result, None with
    ``--index-only``."""
    began = time.perf_counter()
    if not reused:
        common.index_roots(idx, [big, small], max_bytes=1 << 20, batch=1000)
    indexed = time.perf_counter() - began
    if args.index_only:
        print(f"indexed in {indexed:.0f} s: {args.keep}")
        return None
    filters = _filters(args.corpus, big, small)
    times: dict[str, list[float]] = {"unfiltered": [], **{k: [] for k in filters}}
    modes: dict[str, list[str]] = {name: [] for name in times}
    full = 0
    runs = [("unfiltered", NO_FILTERS), *filters.items()]
    for n in range(args.questions):
        plan = to_plan(" ".join(rng.sample(words, rng.choice((2, 3)))))
        # Each run first as often: the first pays for the pages the others then find.
        for name, given in runs[n % len(runs) :] + runs[: n % len(runs)]:
            began = time.perf_counter()
            found = searching.search(idx, replace(plan, filters=given))
            times[name].append((time.perf_counter() - began) * 1000)
            modes[name].append(found.mode)
            if name == SCOPE:
                full += len(found.hits) == min(10, found.total)
    base = _summary(times["unfiltered"])
    result: dict[str, Any] = {
        "corpus": args.corpus,
        "backend": args.backend,
        "files": f"{big} + {SMALL} in a small root",
        "index_seconds": None if reused else round(indexed, 1),
        "questions": args.questions,
        "load": os.getloadavg(),
        "commit": common.git("rev-parse", "--short", "HEAD").strip(),
        "searcher": str(Path(searching.__file__).parents[1]),  # the daemon package run
        "unfiltered": base,
        "small_root_lists_full": f"{full}/{args.questions}",
    }
    for name in filters:
        got = _summary(times[name])
        result[name] = got | {
            "p50_ratio": round(got["p50_ms"] / base["p50_ms"], 2),
            "p99_ratio": round(got["p99_ms"] / base["p99_ms"], 2),
        }
        # Questions no filtered document holds every word of: the search then ranks
        # those holding any (a second statement, more matches), unlike the unfiltered one.
        alike = [
            (t, u)
            for t, u, m, um in zip(
                times[name], times["unfiltered"], modes[name], modes["unfiltered"], strict=True
            )
            if m == um
        ]
        result[name] |= {
            "any_word_fallbacks": len(times[name]) - len(alike),
            "p50_ratio_same_mode": round(
                common.percentile([t for t, _ in alike], 0.5)
                / common.percentile([u for _, u in alike], 0.5),
                2,
            )
            if alike
            else None,
        }
    return result


if __name__ == "__main__":
    main()
