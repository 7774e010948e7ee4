"""Where a full index's writer thread spends its time, in-process, with and without
the background checkpoints (``daemon/backends/sqlite/checkpointer.py``), alternating in one run.

Each round indexes the corpus from an empty state directory through the daemon's own
``Indexer.refresh`` (no socket) and reports, for the writer thread: the wall time of
the ``docs`` inserts, the rest of each batch (files rows, commits and, with SQLite's
own checkpoints, the checkpoints inside them), and the checkpoint that ends the
refresh. ``sqlite`` rounds restore SQLite's automatic checkpoint (every 1000 pages,
inside the commit) and turn the background one off: the write path before it.

    .venv/bin/python bench/write_path.py [CORPUS] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import anyio
from kbindex.daemon.backends.sqlite import documents
from kbindex.daemon.backends.sqlite.checkpointer import Checkpointer
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.health import Health
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.texts import Texts

DEFAULT_CORPUS = Path("/tmp/kbindex-bench/corpus-20000f-200mb-s1")
F = TypeVar("F", bound=Callable[..., Any])
WALL: Counter[str] = Counter()


def timed(name: str, fn: F) -> F:
    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            WALL[name] += time.perf_counter() - began

    return run  # type: ignore[return-value]


Store.apply = timed("batches", Store.apply)  # type: ignore[method-assign]
Store.checkpoint = timed("final checkpoint", Store.checkpoint)  # type: ignore[method-assign]
documents.insert = timed("docs inserts", documents.insert)
_wrote = Checkpointer.wrote


async def one_round(corpus: Path, mode: str) -> dict[str, float]:
    WALL.clear()
    Checkpointer.wrote = _wrote if mode == "background" else lambda self: None  # type: ignore[method-assign]
    work = Path(tempfile.mkdtemp(prefix="kbindex-write-path-", dir="/tmp"))
    try:
        store = Store(work / "index.sqlite3", Texts(Roots([corpus])).current)
        await anyio.to_thread.run_sync(store.open)
        if mode == "sqlite":
            store.writer.execute("PRAGMA wal_autocheckpoint = 1000")
        rules = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
        indexer = Indexer(store, Roots([corpus]), rules, Health(), 10 << 20)
        cpu = time.process_time()
        outcome = await indexer.refresh()
        cpu = time.process_time() - cpu
        await anyio.to_thread.run_sync(store.close)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "scan_s": round(outcome.seconds, 2),
        "cpu_s": round(cpu, 2),
        "docs_inserts_s": round(WALL["docs inserts"], 2),
        "rest_of_batches_s": round(WALL["batches"] - WALL["docs inserts"], 2),
        "final_checkpoint_s": round(WALL["final checkpoint"], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    results: dict[str, list[dict[str, float]]] = {"sqlite": [], "background": []}
    for _ in range(args.rounds):
        for mode in results:
            r = anyio.run(one_round, args.corpus, mode)
            results[mode].append(r)
            print(mode.ljust(10), "  ".join(f"{k} {v:6.2f}" for k, v in r.items()), flush=True)
    for mode, rounds in results.items():
        medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        print(f"median {mode:10s}", "  ".join(f"{k} {v:6.2f}" for k, v in medians.items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
