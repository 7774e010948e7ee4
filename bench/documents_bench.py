"""Issue 40: kbindexd (kbindex[documents]) against Recoll on the same documents, in one run.

Reads the directory given (never writes into it): PDFs, web pages, Office and
OpenDocument files and EPUBs, for example what Debian's documentation packages install:

    apt-get install python3-doc texlive-latex-base-doc texlive-latex-recommended-doc \\
        recoll poppler-utils
    mkdir /tmp/docs && cd /usr/share/doc && find -L python3.11-doc/html texlive-doc \\
        \\( -name '*.pdf' -o -name '*.html' \\) -type f | cpio -pdmL /tmp/docs
    .venv/bin/python bench/documents_bench.py /tmp/docs

For each tool, from an empty state (kbindexd: a state directory under ``--work``, the
documents' extensions only, ``--watch off``; Recoll: ``recollindex`` with a throwaway
configuration directory whose ``topdirs`` is the corpus, its defaults otherwise, so
its own PDF helper, pdftotext):

- full index: wall time from spawn to done, documents per second, and the CPU time it
  took (the process and its helpers: on a shared machine, wall time follows the load);
- documents with text: those a query for common English words (any of them) finds,
  the same query for both; kbindexd's skip reasons by count;
- peak RSS: kbindexd's own (VmHWM) and its largest extraction worker; recollindex and
  its largest helper (sampled from /proc every 0.1 s);
- index size on disk (kbindexd: its state directory, the extraction cache included;
  Recoll: its configuration directory, the Xapian database included);
- a no-change rescan (kbindexd: ``refresh_wait``; Recoll: ``recollindex`` again);
- for each ``--query``: the hit count and the first results of each (all the words:
  kbindexd's mode ``all``, ``recollq -a``), to check by hand.

Prints a table and writes JSON to ``bench/out/documents_bench.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from common import REPO, start_daemon, stop_daemon, wait_scan, wait_serving, write_results
from kbindex.daemon.extracting import formats
from kbindex.proto.client import Client

COMMON = "the and of to in is"
QUERIES = (
    "hyperref bookmarks",
    "fontenc T1 encoding",
    "asyncio event loop",
    "dataclass frozen",
    "subprocess Popen",
    "tabular column alignment",
    "babel language",
    "unittest mock patch",
    "geometry paper margins",
    "decimal rounding",
    "graphicx includegraphics",
    "regular expression lookahead",
)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return found


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants: each live process's own time and its
    reaped children's (a helper that has exited counts in its parent's)."""
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return round(total / os.sysconf("SC_CLK_TCK"), 1)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler:
    """Peak RSS of a process and, apart, of the largest of its descendants."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.own = 0.0
        self.child = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            for p in _tree(self.pid):
                rss = _rss_mb(p)
                if p == self.pid:
                    self.own = max(self.own, rss)
                else:
                    self.child = max(self.child, rss)

    def done(self) -> tuple[float, float]:
        self.stop.set()
        self.thread.join()
        return round(self.own, 1), round(self.child, 1)


def _size_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


async def _kbindexd(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    extensions = [a for ext in formats.KINDS for a in ("--include-ext", ext)]
    d = start_daemon(
        corpus, work, *extensions, "--watch", "off", "--scan-interval", "86400",
        "--max-file-size-mb", "500", "--max-document-size-mb", "500", "--semantic", "off",
    )  # fmt: skip
    sampler = Sampler(d.proc.pid)
    try:
        await wait_serving(d)
        async with Client.connect(d.sock, client_name="bench") as c:
            status = await wait_scan(c, 7200, poll=0.5)
            seconds = time.perf_counter() - d.started
            cpu = _tree_cpu(d.proc.pid)
            own, child = sampler.done()
            own = max(own, float(_vm_hwm(d.proc.pid)))
            rescans = []
            for _ in range(3):
                started = time.perf_counter()
                async for _reply in c.refresh_wait([], full=False):
                    pass
                rescans.append(time.perf_counter() - started)
            status = await c.status()
            with_text = (await c.search(COMMON, mode="any", limit=1)).total_hits
            answers = {}
            for q in queries:
                reply = await c.search(q, limit=3, mode="all")  # as recollq -a
                answers[q] = {
                    "hits": reply.total_hits,
                    "first": [
                        f"{h.relpath}" + (f" p.{h.page}" if h.page else "") for h in reply.hits
                    ],
                }
    finally:
        stop_daemon(d)
    return {
        "index_seconds": round(seconds, 1),
        "cpu_seconds": cpu,
        "indexed": status.indexed_files,
        "skipped": dict(status.skipped),
        "with_text": with_text,
        "peak_rss_mb": own,
        "worker_peak_rss_mb": child,
        "index_mb": _size_mb(d.state),
        "rescan_seconds": round(sorted(rescans)[1], 3),
        "queries": answers,
    }


def _vm_hwm(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _recoll(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    conf = work / "recoll"
    shutil.rmtree(conf, ignore_errors=True)
    conf.mkdir(parents=True)
    (conf / "recoll.conf").write_text(f"topdirs = {corpus}\nloglevel = 2\n")

    def index() -> tuple[float, float, float, float]:
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.Popen(
            ["recollindex", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        sampler = Sampler(proc.pid)
        proc.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        own, child = sampler.done()
        return time.perf_counter() - started, own, child, round(cpu, 1)

    seconds, own, child, cpu = index()
    rescan, _, _, _ = index()

    def count(*query: str) -> int:
        out = subprocess.run(
            ["recollq", "-c", str(conf), "-Q", *query], capture_output=True, text=True
        ).stdout
        for line in out.splitlines():
            if "results" in line:
                return int(line.split()[0])
        return 0

    answers = {}
    for q in queries:
        out = subprocess.run(
            ["recollq", "-c", str(conf), "-b", "-n", "3", "-a", q], capture_output=True, text=True
        ).stdout
        answers[q] = {
            "hits": count("-a", q),
            "first": [line.replace(f"file://{corpus}/", "") for line in out.splitlines()[-3:]],
        }
    return {
        "index_seconds": round(seconds, 1),
        "cpu_seconds": cpu,
        "indexed": count(f"dir:{corpus}"),
        "with_text": count("-o", COMMON),
        "peak_rss_mb": own,
        "worker_peak_rss_mb": child,
        "index_mb": _size_mb(conf),
        "rescan_seconds": round(rescan, 3),
        "queries": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kbindex-documents-bench"))
    parser.add_argument("--query", action="append", dest="queries")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--no-recoll", action="store_true", help="kbindexd alone (a corpus Recoll takes hours on)"
    )
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    queries = args.queries or list(QUERIES)
    files = [p for p in corpus.rglob("*") if p.is_file() and formats.kind(str(p))]
    kinds: dict[str, int] = {}
    for p in files:
        kinds[formats.kind(str(p)) or ""] = kinds.get(formats.kind(str(p)) or "", 0) + 1
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    results: dict[str, Any] = {
        "corpus": str(corpus),
        "files": len(files),
        "kinds": kinds,
        "corpus_mb": round(sum(p.stat().st_size for p in files) / 2**20, 1),
        "load": os.getloadavg()[0],
    }
    results["kbindexd"] = anyio.run(_kbindexd, corpus, args.work, queries)
    results["load_after_kbindexd"] = os.getloadavg()[0]
    if args.no_recoll:
        k = results["kbindexd"]
        print(
            f"{len(files)} documents {kinds}, {results['corpus_mb']} MB; load {results['load']:.1f}"
        )
        for key, value in k.items():
            if key != "queries":
                print(f"{key:28} {value}")
        print(f"{'documents/s':28} {len(files) / k['index_seconds']:.1f}")
        path = write_results(results, args.json, REPO / "bench/out/documents_bench.json")
        print(f"results: {path}", file=sys.stderr)
        return
    results["recoll"] = _recoll(corpus, args.work, queries)
    results["load_after"] = os.getloadavg()[0]
    n = len(files)
    print(f"{n} documents {kinds}, {results['corpus_mb']} MB; load {results['load']:.1f}")
    print(f"{'':28} {'kbindexd':>12} {'recoll':>12}")
    k, r = results["kbindexd"], results["recoll"]
    rows = [
        ("full index (s)", "index_seconds"),
        ("CPU of the full index (s)", "cpu_seconds"),
        ("documents indexed", "indexed"),
        ("documents with text", "with_text"),
        ("peak RSS (MB)", "peak_rss_mb"),
        ("largest helper RSS (MB)", "worker_peak_rss_mb"),
        ("index size (MB)", "index_mb"),
        ("no-change rescan (s)", "rescan_seconds"),
    ]
    for label, key in rows:
        print(f"{label:28} {k[key]:>12} {r[key]:>12}")
    print(f"{'documents/s':28} {n / k['index_seconds']:>12.1f} {n / r['index_seconds']:>12.1f}")
    print(f"kbindexd skipped: {k['skipped']}")
    for q in queries:
        print(f"{q!r}: kbindexd {k['queries'][q]['hits']} {k['queries'][q]['first']}")
        print(f"{'':{len(q) + 3}}recoll   {r['queries'][q]['hits']} {r['queries'][q]['first']}")
    path = write_results(results, args.json, REPO / "bench/out/documents_bench.json")
    print(f"results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
