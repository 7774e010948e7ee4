"""What a filter costs a search (issue 41): 20,000 generated Markdown notes with front
matter (tags, status, a created date) in a large root, and a small root of 200 notes,
indexed in-process with ``SqliteIndex``; then questions of two or three words, each
run unfiltered and with a tag, a field, a kind, a date span and the small root's scope
(``plan.Filters``), alternating, limit 10. Prints each filter's p50 and p99 against the
unfiltered search's, and checks that the small root's scoped search fills its limit.

    .venv/bin/python bench/filters_bench.py [--notes 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.index.plan import NO_FILTERS, DateRange, Filters
from kbindex.daemon.index.values import Batch, Update
from kbindex.daemon.indexing import textfile
from kbindex.daemon.indexing.documents import prepare
from kbindex.daemon.indexing.kinds import Classifier
from kbindex.daemon.indexing.scanner import Seen
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import hits as searching
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts

KINDS = Classifier()

WORDS = [f"w{n}" for n in range(3000)]
TAGS = [f"topic{n}" for n in range(50)]
QUESTIONS = 300
DAY = 86400.0


def _note(rng: random.Random, i: int) -> str:
    words = " ".join(rng.choices(WORDS, weights=[1 / (r + 1) for r in range(len(WORDS))], k=150))
    tags = ", ".join(rng.sample(TAGS, 3))
    created = time.strftime("%Y-%m-%d", time.gmtime(1.7e9 - rng.randrange(1000) * DAY))
    status = rng.choice(["draft", "done", "review"])
    front = f"title: Note {i}\ntags: [{tags}]\nstatus: {status}\ncreated: {created}"
    return f"---\n{front}\n---\n# Note {i}\n{words}\n"


def _index(roots: list[Path], db: Path) -> SqliteIndex:
    idx = SqliteIndex(db, Texts(Roots(tuple(roots))).current)
    idx.open()
    for root in roots:
        batch: list[Any] = []
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                seen = Seen(path, str(root), st.st_size, st.st_mtime_ns)
                loaded = textfile.load(path, 1 << 20)
                if isinstance(loaded, textfile.Loaded):
                    loaded = prepare(seen.relpath, loaded)
                batch.append(Update(seen, loaded, KINDS.of(seen.root, seen.relpath)))
                if len(batch) >= 1000:
                    idx.apply(Batch(batch))
                    batch = []
        if batch:
            idx.apply(Batch(batch))
    return idx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(41)
    work = Path(tempfile.mkdtemp(prefix="filters-bench-", dir="/tmp"))
    try:
        big, small = work / "big", work / "small"
        for root, count in ((big, args.notes), (small, 200)):
            for i in range(count):
                folder = root / f"d{i % 100}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"n{i}.md").write_text(_note(rng, i), encoding="utf-8")
        began = time.perf_counter()
        idx = _index([big, small], work / "index.sqlite3")
        indexed = time.perf_counter() - began
        filters = {
            "tag": Filters(tags=("topic7",)),
            "field": Filters(fields=(("status", "draft"),)),
            "kind": Filters(kinds=("doc",)),
            "created 2023": Filters(dated=(DateRange(1.672e9, 1.704e9, "created"),)),
            "small root (scope)": Filters(roots=(str(small),)),
        }
        times: dict[str, list[float]] = {"unfiltered": [], **{k: [] for k in filters}}
        full = 0
        runs = [("unfiltered", NO_FILTERS), *filters.items()]
        for n in range(QUESTIONS):
            plan = to_plan(" ".join(rng.sample(WORDS[:600], rng.choice((2, 3)))))
            # Each run first as often: the first pays for the pages the others then find.
            for name, given in runs[n % len(runs) :] + runs[: n % len(runs)]:
                began = time.perf_counter()
                found = searching.search(idx, replace(plan, filters=given))
                times[name].append((time.perf_counter() - began) * 1000)
                if name == "small root (scope)":
                    full += len(found.hits) == min(10, found.total)
        idx.close()

        def summary(values: list[float]) -> dict[str, float]:
            values = sorted(values)
            return {
                "p50_ms": round(values[len(values) // 2], 2),
                "p99_ms": round(values[int(len(values) * 0.99)], 2),
            }

        base = summary(times["unfiltered"])
        result: dict[str, Any] = {
            "notes": args.notes + 200,
            "index_seconds": round(indexed, 1),
            "questions": QUESTIONS,
            "unfiltered": base,
            "small_root_lists_full": f"{full}/{QUESTIONS}",
        }
        for name in filters:
            got = summary(times[name])
            result[name] = got | {"p50_ratio": round(got["p50_ms"] / base["p50_ms"], 2)}
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
