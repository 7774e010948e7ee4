"""Any tree, bare FTS5 against kbindexd in one run: the figures of the kernel-size issue.

Reads the tree given as the argument (never writes into it) and measures, side by side:

- bare FTS5 (``bare.load``: every file, one stored body column, the porter tokenizer,
  one transaction, then ``bare.merge``'s optimize) against kbindexd started from a cold
  state directory under /tmp with every extension (``--include-ext '*'``): full index
  time, index size on disk (kbindexd: index.sqlite3 + -wal) over the corpus size, the
  daemon's peak RSS (VmHWM) while indexing; then, after a restart on the same state,
  the time from spawn to idle (start-up scan done), the idle RSS, and the no-change
  rescan (``kbctl reindex --wait``'s request through the client, median of 5);
- in-process query latency, kbindexd's searcher (``searcher.search`` on a copy of the
  daemon's index opened with ``Store``) against bare FTS5 on its table, query by query
  in turn: a prefix, questions of 8-10 words, a common word, a phrase, a rare word;
- ``rg -uu -i -F`` whole-process time for the same words (all of its output read), what
  an agent without an index pays today.

Query words not given as options are picked deterministically from the tree's vocabulary
(the daemon's exact-word table, ``--seed``). Prints a table (figure | bare FTS5 |
kbindexd | rg -uu | target) and writes everything as JSON. A benchmark, not a test: on
the Linux kernel (1.3 GB) it takes about 4 minutes on 2 cores and about 6 GB under /tmp
(the bare table, the daemon's state, the copy searched).

The kernel tree (Debian's source package):

    apt-get install linux-source-6.1 && tar -xaf /usr/src/linux-source-6.1.tar.xz -C DIR
    .venv/bin/python bench/tree_bench.py DIR/linux-source-6.1 --prefix 'spin_lock_irq*' \\
        --question 'how does the scheduler pick the next task to run' ...

Any other tree:

    .venv/bin/python bench/tree_bench.py /tmp/bench/corpus
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import bare
import common
import report
from index_bench import warm_cache
from kbindex.daemon.backends.sqlite.render import match, render
from kbindex.daemon.backends.sqlite.schema import VOCABULARY
from kbindex.daemon.backends.sqlite.searcher import search
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import disk_bytes, sqlite
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts
from kbindex.proto.client import Client

HERE = Path(__file__).resolve().parent
KINDS = ("prefix", "questions", "common", "phrase", "rare")
QUESTIONS = (
    "how does the {0} {1} handle {2} when {3} is {4}",
    "where is the {0} {1} set for {2}",
    "what {0} {1} does the {2} use for {3}",
    "why does {0} {1} fail when the {2} {3}",
)
# No periodic scan; meaning off: with the semantic extra installed, the embedder would
# load its model and embed the tree after the first scan, inside the idle and rescan
# figures (219 MB idle on the kernel, 2.6 s for a first rescan).
DAEMON_OPTIONS = ("--include-ext", "*", "--scan-interval", "86400", "--semantic", "off")


# ------------------------------------------------------------------ kbindexd


async def measure_daemon(tree: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Full index from cold, stop; restart on the same state: start-up, idle RSS, rescans."""
    out: dict[str, Any] = {}
    with common.running_daemon(tree, work, *DAEMON_OPTIONS) as d:
        out["command"] = d.command
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="tree_bench") as c:
            st = await common.wait_scan(c, args.timeout, poll=0.2)
            out["full"] = {
                "wall_s": round(time.perf_counter() - d.started, 3),
                "last_scan_seconds": round(st.last_scan_seconds or 0.0, 3),
                "cpu_s": round(common.cpu_seconds(d.proc.pid), 2),
                "indexed_files": st.indexed_files,
                "skipped": st.skipped,
            }
            out["peak_rss_mb"] = round(common.peak_rss_mb(d.proc.pid), 1)
            out["index_bytes"] = sum(disk_bytes(d.state / "index.sqlite3"))
    out["exit_code"] = d.proc.returncode
    with common.running_daemon(tree, work, *DAEMON_OPTIONS) as d:
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="tree_bench") as c:
            st = await common.wait_scan(c, args.timeout, poll=0.02)
            out["restart_to_idle_s"] = round(time.perf_counter() - d.started, 3)
            await anyio.sleep(1.0)  # let the start-up's garbage go before reading RSS
            out["idle_rss_mb"] = round(common.rss_mb(d.proc.pid), 1)
            out["rescan"] = await rescans(c, args.rescans)
            out["rescan_peak_rss_mb"] = round(common.peak_rss_mb(d.proc.pid), 1)
    out["index_bytes_after_restart"] = sum(disk_bytes(d.state / "index.sqlite3"))
    return out


async def rescans(c: Client, n: int) -> dict[str, Any]:
    """``kbctl reindex --wait``: a no-change refresh of every root, waited for."""
    seconds = []
    for _ in range(n):
        t = time.perf_counter()
        async for _reply in c.refresh_wait(full=False):
            pass
        seconds.append(time.perf_counter() - t)
    return {
        "client_s": [round(s, 3) for s in seconds],
        "median_s": round(common.percentile(seconds, 0.5), 3),
    }


# ------------------------------------------------------------------ queries


def vocabulary(db: Path) -> list[tuple[str, int]]:
    """Words of 4+ letters a-z in the daemon's exact-word table, most documents first."""
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute(
        f"SELECT term, doc FROM {VOCABULARY} WHERE length(term) >= 4"
        " AND term NOT GLOB '*[^a-z]*' ORDER BY doc DESC, term"
    ).fetchall()
    conn.close()
    return [(str(t), int(n)) for t, n in rows]


def pick_queries(db: Path, bare_db: Path, docs: int, args: argparse.Namespace) -> dict[str, Any]:
    """The queries of each kind: the options given, the rest from the vocabulary."""
    rng = random.Random(args.seed)
    words = vocabulary(db)
    middle = sorted(w for w, n in words if docs * 0.002 <= n <= docs * 0.05) or [words[0][0]]
    once = sorted(w for w, n in words if n == 1 and len(w) >= 7) or [words[-1][0]]
    conn = sqlite.connect(f"file:{bare_db}?mode=ro", uri=True)
    try:
        usual = written(conn, middle, rng, 20) or middle[:1]
        stem = rng.choice([w for w in usual if len(w) >= 6] or usual)
        questions = args.question or [
            q.format(*rng.sample(usual, 5)) for q in QUESTIONS if len(usual) >= 5
        ]
        return {
            "prefix": [args.prefix or stem[: max(4, len(stem) - 2)] + "*"],
            "questions": questions,
            "common": [args.common or words[0][0]],
            "phrase": [f'"{args.phrase or phrase_from(conn, middle, rng)}"'],
            "rare": [args.rare or (written(conn, once, rng, 1) or once[:1])[0]],
        }
    finally:
        conn.close()


def written(conn: sqlite.Connection, words: list[str], rng: random.Random, n: int) -> list[str]:
    """Up to ``n`` of ``words``, in random order, that a document holds as written: the
    exact-word table also holds words the daemon derives (identifiers joined), which
    nobody types and rg never finds."""
    found = []
    for word in rng.sample(words, min(20 * n, len(words))):
        row = conn.execute("SELECT body FROM docs WHERE docs MATCH ? LIMIT 1", (f'"{word}"',))
        body = row.fetchone()
        if body and re.search(rf"\b{word}\b", body[0], re.IGNORECASE):
            found.append(word)
            if len(found) == n:
                break
    return found


def phrase_from(conn: sqlite.Connection, middle: list[str], rng: random.Random) -> str:
    """Two words side by side in a document holding a middle-frequency word, both of
    middle frequency if such a pair is there."""
    known = set(middle)
    for word in rng.sample(middle, min(20, len(middle))):
        row = conn.execute(
            "SELECT body FROM docs WHERE docs MATCH ? ORDER BY rowid LIMIT 1", (f'"{word}"',)
        ).fetchone()
        pairs = re.findall(r"\b([A-Za-z]{4,})[ \t]+(?=([A-Za-z]{4,})\b)", row[0] if row else "")
        for a, b in pairs:
            if a.lower() in known and b.lower() in known:
                return f"{a.lower()} {b.lower()}"
    return middle[0]


def measure_queries(
    daemon_db: Path, bare_db: Path, queries: dict[str, list[str]], rounds: int, tree: Path
) -> dict[str, Any]:
    """Each query on both in turn, ``rounds`` times after one untimed round: the machine
    drifts within minutes, so the two are measured side by side."""
    roots = Roots((tree,))
    store = Store(daemon_db, Texts(roots).current)
    store.open()
    bare_searcher = bare.Searcher(bare_db)
    times: dict[str, dict[str, list[float]]] = {"kbindexd": {}, "bare": {}}
    hits: dict[str, list[int]] = {}
    try:
        with store.reader() as conn:
            for r in range(rounds + 1):
                for kind, texts in queries.items():
                    for q in texts:
                        bare_q = match(to_plan(q, "raw" if kind == "prefix" else "auto"))
                        bare_ms = bare_searcher.ms(render(bare_q.expr or ()))
                        t = time.perf_counter_ns()
                        result = search(conn, to_plan(q, "auto"), within=roots.inside)
                        daemon_ms = (time.perf_counter_ns() - t) / 1e6
                        if r:
                            times["kbindexd"].setdefault(kind, []).append(daemon_ms)
                            times["bare"].setdefault(kind, []).append(bare_ms)
                        else:
                            hits.setdefault(kind, []).append(result.total)
    finally:
        bare_searcher.close()
        store.close()
    out: dict[str, Any] = {who: report.latencies(t) for who, t in times.items()}
    out["kbindexd_total_hits"] = hits
    return out


def measure_rg(tree: Path, queries: dict[str, list[str]], runs: int) -> dict[str, Any]:
    """Whole ``rg`` processes for the words of each kind but the questions (no grep
    takes a question); a prefix is searched as the literal before its ``*``."""
    out: dict[str, Any] = {}
    for kind in ("prefix", "common", "phrase", "rare"):
        literal = queries[kind][0].strip('"').rstrip("*")
        cmd = ["rg", "-uu", "-i", "-F", "--", literal, str(tree)]
        seconds, lines = [], 0
        for _ in range(runs):
            t = time.perf_counter()
            run = subprocess.run(cmd, capture_output=True, check=False)
            seconds.append(time.perf_counter() - t)
            lines = run.stdout.count(b"\n")
        out[kind] = {
            "literal": literal,
            "median_ms": round(common.percentile(seconds, 0.5) * 1000, 1),
            "lines": lines,
        }
    return out


# ------------------------------------------------------------------ the table


def figures(r: dict[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    """(figure, bare, kbindexd, rg, target, verdict) rows."""
    b, d, q, rg = r["bare_fts5"], r["kbindexd"], r["queries"], r["rg"]
    corpus = b["bytes"]
    bare_s = b["seconds"] + b["merge"]["seconds"]
    speed = bare_s / d["full"]["wall_s"]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    rows = [
        (
            "corpus",
            f"{b['files']} files, {corpus / 1e6:.1f} MB",
            f"{d['full']['indexed_files']} indexed, {sum(d['full']['skipped'].values())} skipped",
            "",
            "",
            "",
        ),
        (
            "full index time (kbindexd: spawn to scan done)",
            f"{bare_s:.1f} s (load {b['seconds']:.1f} + merge {b['merge']['seconds']:.1f})",
            f"{d['full']['wall_s']:.1f} s = {speed:.2f}x bare's speed",
            "",
            ">= 0.70x bare",
            verdict(speed >= 0.70),
        ),
        (
            "index size on disk / corpus",
            f"{b['index_bytes'] / corpus:.2f}x ({b['index_bytes'] / 1e6:.0f} MB)",
            f"{d['index_bytes'] / corpus:.2f}x ({d['index_bytes'] / 1e6:.0f} MB)",
            "",
            "<= 0.60x",
            verdict(d["index_bytes"] / corpus <= 0.60),
        ),
        (
            "peak RSS while indexing (VmHWM)",
            "",
            f"{d['peak_rss_mb']:.0f} MB",
            "",
            "<= 200 MB",
            verdict(d["peak_rss_mb"] <= 200),
        ),
        (
            "RSS idle after a restart",
            "",
            f"{d['idle_rss_mb']:.0f} MB",
            "",
            "<= 100 MB",
            verdict(d["idle_rss_mb"] <= 100),
        ),
        (
            "no-change rescan (reindex --wait, median of 5)",
            "",
            f"{d['rescan']['median_s']:.3f} s",
            "",
            "<= 1.0 s",
            verdict(d["rescan"]["median_s"] <= 1.0),
        ),
        (
            "restart to idle (spawn to start-up scan done)",
            "",
            f"{d['restart_to_idle_s']:.2f} s",
            "",
            "",
            "",
        ),
    ]
    for kind in KINDS:
        bare_ms, ms = q["bare"][kind]["p50_ms"], q["kbindexd"][kind]["p50_ms"]
        rg_ms = f"{rg[kind]['median_ms']:.0f} ms" if kind in rg else "n/a"
        target, ok = "hold", ""
        if kind == "prefix":
            target, ok = "<= 1.5x bare", verdict(ms <= 1.5 * bare_ms)
        elif kind == "questions":
            target, ok = "<= 20 ms", verdict(ms <= 20)
        n = len(q["queries"][kind])
        label = f"{kind} p50 ({n} quer{'ies' if n > 1 else 'y'} x {r['rounds']} runs)"
        rows.append(
            (label, f"{bare_ms:.2f} ms", f"{ms:.2f} ms ({ms / bare_ms:.2f}x)", rg_ms, target, ok)
        )
    return rows


def table(rows: list[tuple[str, ...]]) -> str:
    header = ("figure", "bare FTS5", "kbindexd", "rg -uu", "target", "")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("-" * len(lines[0]))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def markdown(rows: list[tuple[str, ...]]) -> str:
    lines = [
        "| figure | bare FTS5 | kbindexd | rg -uu | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} {v}".rstrip() + " |" for a, b, c, d, e, v in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tree", type=Path, help="the tree to index (only read)")
    p.add_argument("--prefix", help="a prefix query, e.g. 'spin_lock_irq*'")
    p.add_argument("--question", action="append", help="a question (repeat for more)")
    p.add_argument("--common", help="a common word")
    p.add_argument("--phrase", help="two or more words, searched as a phrase")
    p.add_argument("--rare", help="a rare word")
    p.add_argument("--seed", type=int, default=1, help="for the words picked from the tree")
    p.add_argument("--rounds", type=int, default=7, help="timed runs of each query")
    p.add_argument("--rescans", type=int, default=5)
    p.add_argument("--rg-runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=3600.0, help="per phase, seconds")
    p.add_argument("--json", type=Path, help="results file (default bench/out/...json)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (state, logs)")
    args = p.parse_args(argv)
    tree = args.tree.resolve()
    if not tree.is_dir():
        p.error(f"not a directory: {tree}")

    work = Path(tempfile.mkdtemp(prefix="kbindex-tree-", dir="/tmp"))
    load_before = os.getloadavg()
    try:
        print(f"{tree}: page cache warmed in {warm_cache(tree):.1f} s; bare FTS5...", flush=True)
        ceiling = bare.load(tree, work / "bare.sqlite3")
        ceiling["merge"] = bare.merge(work / "bare.sqlite3")
        ceiling["index_bytes"] = (work / "bare.sqlite3").stat().st_size
        print(f"bare FTS5: {ceiling['seconds']} s + merge {ceiling['merge']['seconds']} s")
        print("kbindexd...", flush=True)
        daemon = anyio.run(measure_daemon, tree, work, args)
        print(f"kbindexd: {daemon['full']['wall_s']} s; queries...", flush=True)
        copy = work / "copy" / "index.sqlite3"
        copy.parent.mkdir()
        for suffix in ("", "-wal"):
            src = work / "state" / f"index.sqlite3{suffix}"
            if src.exists():
                shutil.copyfile(src, f"{copy}{suffix}")
        queries = pick_queries(copy, work / "bare.sqlite3", daemon["full"]["indexed_files"], args)
        searched = measure_queries(copy, work / "bare.sqlite3", queries, args.rounds, tree)
        searched["queries"] = queries
        print("rg...", flush=True)
        rg = measure_rg(tree, queries, args.rg_runs)
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
        "tree": str(tree),
        "rounds": args.rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite.sqlite_version,
            "loadavg_before_after": [load_before, os.getloadavg()],
            "git": common.git("rev-parse", "--short", "HEAD").strip(),
        },
        "bare_fts5": ceiling,
        "kbindexd": daemon,
        "queries": searched,
        "rg": rg,
    }
    rows = figures(results)
    results["markdown"] = markdown(rows)
    print(table(rows))
    print(f"queries: {json.dumps(queries)}")
    print(
        "load average 1/5/15 min before -> after: "
        + " -> ".join(
            "/".join(f"{x:.2f}" for x in la) for la in results["machine"]["loadavg_before_after"]
        )
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_results(results, args.json, HERE / "out" / f"tree_bench-{tree.name}-{stamp}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
