"""grep through kbindexd against ripgrep on any tree: the figures of the grep issue.

Reads the tree given as the argument (never writes into it) and measures, in one run:

- the full index of this checkout's kbindexd (``--include-ext '*'``, state under /tmp),
  with ``--against OLD_KBINDEXD`` alternated with another build (old, new, old, new: the
  VM drifts within minutes), and the trigram index's size (``docs_grams``, from dbstat)
  over the corpus;
- per pattern, warm: (a) a ``Grep`` request through the socket (``BlockingClient``,
  limit 100), p50/p99; (b) ``rg -uu -n PATTERN .`` run in the tree as a whole process,
  all its output read (what an agent pays today); (c) the same restricted to the files
  kbindexd indexed (``--glob '!/REL'`` for each file rg reads that the index left out),
  when the two sets differ. The three alternate round by round; the ratios are rg's p50
  over kbindexd's;
- a correctness check: the first 100 lines kbindexd returns against the first 100 of
  ``rg -uu --sort path`` (restricted as in (c)), and the reply's total against the lines
  (c) printed;
- 8 clients grepping at once (an agent's burst): p50/p99 per request;
- optionally (``--breakdown``) each pattern in-process on the index: the trigram query,
  the candidate lookup and ripgrep over the candidates, timed apart.

Patterns come in five classes: selective literals (``-F``), identifiers (``-w``), regexes
with literals, case-insensitive words (``-i``), patterns with no trigram. Those not given
as options are picked from the tree (``--seed``): rare words, identifiers, a
middle-frequency word. A benchmark, not a test; on the Linux kernel (1.3 GB, about 2 GB
of index under /tmp per build) it takes 10 to 20 minutes on 2 cores:

    .venv/bin/python bench/grep_bench.py /srv/kernel/linux-source-6.1 \\
        --against /tmp/kb-old/.venv/bin/kbindexd --regex 'spin_lock_irq\\w*' ...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import common
from index_bench import warm_cache
from kbindex.daemon.backends.sqlite import candidates
from kbindex.daemon.backends.sqlite.schema import VOCABULARY
from kbindex.daemon.engine import disk_bytes, sqlite
from kbindex.daemon.grep import grepper as grep
from kbindex.daemon.grep import narrowing, ripgrep
from kbindex.daemon.roots import Roots
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.client import Client
from kbindex.proto.messages import Grep, GrepReply

HERE = Path(__file__).resolve().parent
KINDS = ("literal", "identifier", "regex", "icase", "none")
SELECTIVE = ("literal", "identifier", "regex", "icase")
DAEMON_OPTIONS = ("--include-ext", "*", "--scan-interval", "86400")  # no periodic scan
LIMIT = 100
NO_TRIGRAM = (r"\w+\(", ".")
RG = "rg"
"""The ripgrep measured against (``--rg``): by default the one on PATH, as an agent
runs it; the daemon runs the one ``ripgrep.find`` picks (KBINDEX_RG, else the package's)."""
TWO_CHARS = "ab"


@dataclass(frozen=True)
class Case:
    kind: str
    pattern: str
    fixed: bool = False
    word: bool = False
    ignore_case: bool = False

    def flags(self) -> list[str]:
        return (
            (["-F"] if self.fixed else [])
            + (["-w"] if self.word else [])
            + (["-i"] if self.ignore_case else [])
        )

    def label(self) -> str:
        return " ".join([*self.flags(), f"'{self.pattern}'"])

    def request(self) -> Grep:
        return Grep(
            pattern=self.pattern,
            fixed=self.fixed,
            word=self.word,
            ignore_case=self.ignore_case,
            limit=LIMIT,
        )


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------ full index


async def _wait_indexed(d: common.Daemon, within: float) -> Any:
    await common.wait_serving(d)
    async with Client.connect(d.sock, client_name="grep_bench") as c:
        return await common.wait_scan(c, within, poll=0.2)


def full_index(
    tree: Path, work: Path, exe: Path, name: str, within: float
) -> tuple[common.Daemon, dict[str, Any]]:
    """A full index from an empty state dir; returns the daemon, still running, and its
    figures."""
    d = common.start_daemon(tree, work, *DAEMON_OPTIONS, exe=exe, name=name)
    load_before = load()
    st = anyio.run(_wait_indexed, d, within)
    return d, {
        "build": name,
        "exe": str(exe),
        "wall_s": round(time.perf_counter() - d.started, 2),
        "cpu_s": round(common.cpu_seconds(d.proc.pid), 1),
        "peak_rss_mb": round(common.peak_rss_mb(d.proc.pid), 0),
        "indexed_files": st.indexed_files,
        "index_bytes": sum(disk_bytes(d.state / "index.sqlite3")),
        "load_before_after": [load_before, load()],
    }


def index_runs(
    tree: Path, work: Path, against: Path | None, pairs: int, within: float
) -> tuple[common.Daemon, list[dict[str, Any]]]:
    """Old and new builds in turn (new last); the last new daemon is left running."""
    order = [("old", against), ("new", common.KBINDEXD)] * pairs if against else []
    order = order or [("new", common.KBINDEXD)]
    runs: list[dict[str, Any]] = []
    for i, (build, exe) in enumerate(order):
        assert exe is not None
        d, figures = full_index(tree, work, exe, build, within)
        print(f"  full index {build}: {figures['wall_s']} s, load {figures['load_before_after']}")
        runs.append(figures)
        if i < len(order) - 1:
            common.stop_daemon(d)
            shutil.rmtree(d.state)
    return d, runs


def trigram_bytes(db: Path) -> dict[str, int]:
    """Bytes of each docs_grams table (dbstat: pages, so free space inside them counts)."""
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'docs_grams%' GROUP BY name"
        ).fetchall()
        (blocks,) = conn.execute("SELECT sum(length(block)) FROM docs_grams_data").fetchone()
    finally:
        conn.close()
    return {**{str(n): int(s) for n, s in rows}, "data_blocks": int(blocks or 0)}


def indexed_files(db: Path) -> tuple[list[str], int]:
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT path, size FROM files WHERE skip_reason IS NULL").fetchall()
    finally:
        conn.close()
    return [p for p, _ in rows], sum(s for _, s in rows)


# ------------------------------------------------------------------ patterns


def pick(db: Path, paths: list[str], args: argparse.Namespace) -> list[Case]:
    """The patterns of each class: the options given, the rest picked from the tree."""
    rng = random.Random(args.seed)
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    try:
        words = conn.execute(
            f"SELECT term, doc FROM {VOCABULARY} WHERE length(term) >= 5"
            " AND term NOT GLOB '*[^a-z]*' ORDER BY term"
        ).fetchall()
    finally:
        conn.close()
    docs = max(1, len(paths))
    counts = dict(words)
    middle = [w for w, n in words if docs * 0.005 <= n <= docs * 0.05] or [words[0][0]]
    # Rare words and identifiers as written in files: the vocabulary also holds words
    # the daemon derives (identifiers joined), which no file holds and rg never finds.
    seen: set[str] = set()
    ident_set: set[str] = set()
    for path in rng.sample(sorted(paths), min(400, len(paths))):
        try:
            text = Path(path).read_text("utf-8", "ignore")[:200_000]
        except OSError:
            continue
        seen.update(re.findall(r"\b[a-z]{9,}\b", text))
        ident_set.update(re.findall(r"\b[a-z][a-z0-9]{2,}_[a-z][a-z0-9]{2,}_[a-z0-9_]{3,}\b", text))
    rare = sorted(w for w in seen if 1 <= counts.get(w, 0) <= 5) or [words[-1][0]]
    idents = sorted(ident_set) or rare
    ident = rng.choice(idents)
    head = ident.split("_")
    cases = [Case("literal", p, fixed=True) for p in args.literal or rng.sample(rare, 2)]
    cases += [Case("identifier", p, word=True) for p in args.identifier or rng.sample(idents, 2)]
    cases += [
        Case("regex", p)
        for p in args.regex or [f"{head[0]}_{head[1][:3]}\\w*", rf"{rng.choice(middle)}\s+\w+"]
    ]
    cases += [Case("icase", p, ignore_case=True) for p in args.icase or rng.sample(middle, 2)]
    cases += [Case("none", p) for p in args.none or NO_TRIGRAM]
    if not args.none:
        cases.append(Case("none", TWO_CHARS, fixed=True))
    return cases


# ------------------------------------------------------------------ ripgrep


def version(rg: str) -> str:
    return subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]


def excluded_globs(tree: Path, indexed: list[str]) -> tuple[list[str], int]:
    """``--glob '!/REL'`` for each file ``rg -uu`` reads that the index left out, and how
    many indexed files rg does not read. (An anchored glob holds for rg run in ``tree``
    on ``.``; on an absolute path it would be matched against the whole path.)"""
    run = subprocess.run([RG, "-uu", "--files", "--null", "."], cwd=tree, capture_output=True)
    listed = {os.fsdecode(p)[2:] for p in run.stdout.split(b"\0") if p}
    known = {os.path.relpath(p, tree) for p in indexed}
    globs = [
        "--glob=!/" + re.sub(r"([\\*?\[\]{}])", r"\\\1", rel) for rel in sorted(listed - known)
    ]
    return globs, len(known - listed)


def rg_whole(cmd: list[str], tree: Path) -> tuple[float, int, int]:
    """A whole rg process run in ``tree``, all of its output read: seconds, bytes, lines."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    size = lines = 0
    while block := proc.stdout.read(1 << 20):
        size += len(block)
        lines += block.count(b"\n")
    proc.wait()
    return time.perf_counter() - started, size, lines


def rg_first(cmd: list[str], tree: Path, n: int) -> list[tuple[str, int, str]]:
    """The first ``n`` lines ``rg --sort path`` prints in ``tree``: (path, line, text)."""
    proc = subprocess.Popen(
        [*cmd[:1], "--sort", "path", "--null", "--no-heading", "--with-filename", *cmd[1:]],
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    out: list[tuple[str, int, str]] = []
    for raw in proc.stdout:
        path, _, rest = raw.partition(b"\0")
        number, _, text = rest.partition(b":")
        text = text.rstrip(b"\n")
        text = text[:-1] if text.endswith(b"\r") else text
        full = os.path.join(tree, os.fsdecode(path).removeprefix("./"))
        out.append((full, int(number), text.decode("utf-8", "replace")))
        if len(out) == n:
            break
    proc.kill()
    proc.wait()
    return out


def compare(reply: GrepReply, expected: list[tuple[str, int, str]]) -> list[str]:
    """Where kbindexd's lines differ from rg's (a clipped line matches if its visible
    part is in rg's line)."""
    got = [(ln.path, ln.line, ln.text) for ln in reply.lines if ln.match]
    problems = []
    if len(got) != len(expected):
        problems.append(f"{len(got)} lines against rg's {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        same_text = g[2] == e[2] or (
            "\u2026" in g[2] and all(part in e[2] for part in g[2].split("\u2026") if part)
        )
        if g[:2] != e[:2] or not same_text:
            problems.append(f"line {i + 1}: kbindexd {g[0]}:{g[1]} {g[2][:80]!r}")
            problems.append(f"line {i + 1}: rg       {e[0]}:{e[1]} {e[2][:80]!r}")
            if len(problems) >= 7:
                break
    return problems


# ------------------------------------------------------------------ greps


def timed_grep(client: BlockingClient, case: Case) -> tuple[float, GrepReply]:
    started = time.perf_counter()
    reply = client.request(case.request(), GrepReply)
    return time.perf_counter() - started, reply


def measure_case(
    client: BlockingClient, tree: Path, case: Case, globs: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """(a), (b) and (c) in turn, ``args.rounds`` rounds after a warm-up of each."""
    rg = [RG, "-uu", "-n", *case.flags(), "--", case.pattern, "."]
    restricted = [RG, "-uu", "-n", *case.flags(), *globs, "--", case.pattern, "."]
    warm_s, reply = timed_grep(client, case)
    per_round = 1 if warm_s > 0.3 else args.greps
    out: dict[str, Any] = {"load_before": load(), "warm_s": round(warm_s, 4)}
    whole = rg_whole(rg, tree)
    limited = rg_whole(restricted, tree) if globs else whole
    times: dict[str, list[float]] = {"kbindexd": [], "rg": [], "rg_same_files": []}
    for _ in range(args.rounds):
        for _ in range(per_round):
            seconds, reply = timed_grep(client, case)
            times["kbindexd"].append(seconds)
        seconds, _, _ = rg_whole(rg, tree)
        times["rg"].append(seconds)
        if globs:
            seconds, _, _ = rg_whole(restricted, tree)
            times["rg_same_files"].append(seconds)
    out["load_after"] = load()
    for who, values in times.items():
        if values:
            out[who] = {
                "n": len(values),
                "p50_ms": round(common.percentile(values, 0.5) * 1e3, 2),
                "p99_ms": round(common.percentile(values, 0.99) * 1e3, 2),
            }
    out["rg_output"] = {"bytes": whole[1], "lines": whole[2], "same_files_lines": limited[2]}
    out["reply"] = {
        "lines": len(reply.lines),
        "total": reply.total,
        "files": reply.files,
        "candidates": reply.candidates,
        "complete": reply.complete,
        "scanned_all": reply.scanned_all,
    }
    out["total_matches_rg"] = reply.total == limited[2]
    out["mismatches"] = compare(reply, rg_first(restricted, tree, LIMIT))
    return out


def burst(sock: Path, cases: list[Case], clients: int, each: int) -> dict[str, Any]:
    """``clients`` connections, each sending ``each`` greps back to back, all at once."""
    seconds: list[float] = []
    start = threading.Barrier(clients)
    lock = threading.Lock()

    def agent(k: int) -> None:
        with BlockingClient.connect(sock, client_name=f"agent{k}") as client:
            start.wait()
            for i in range(each):
                took, _ = timed_grep(client, cases[(k + i) % len(cases)])
                with lock:
                    seconds.append(took)

    load_before = load()
    began = time.perf_counter()
    threads = [threading.Thread(target=agent, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    return {
        "clients": clients,
        "requests": len(seconds),
        "p50_ms": round(common.percentile(seconds, 0.5) * 1e3, 2),
        "p99_ms": round(common.percentile(seconds, 0.99) * 1e3, 2),
        "wall_s": round(wall, 3),
        "load_before_after": [load_before, load()],
    }


def breakdown(db: Path, tree: Path, case: Case) -> dict[str, Any]:
    """One pattern in-process on a read-only copy of the daemon's connection: the trigram
    and phrase queries, the candidate lookup, and ``Grepper.run`` (ripgrep over the
    candidates), each the median of 5."""
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    flags = ripgrep.Flags(
        case.pattern, fixed=case.fixed, ignore_case=case.ignore_case, word=case.word
    )
    grepper = grep.Grepper(Roots([tree]))
    steps: dict[str, list[float]] = {"required": [], "candidates": [], "ripgrep": []}
    found = None
    try:
        for _ in range(6):
            t0 = time.perf_counter()
            query, words = narrowing.required(
                case.pattern, fixed=case.fixed, ignore_case=case.ignore_case, word=case.word
            )
            t1 = time.perf_counter()
            found = candidates.find(conn, query, None, [], [], words)
            t2 = time.perf_counter()
            asyncio.run(grepper.run(flags, found, LIMIT))
            t3 = time.perf_counter()
            for key, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                steps[key].append(value)
    finally:
        conn.close()
    out: dict[str, Any] = {
        k: round(common.percentile(v[1:], 0.5) * 1e3, 2) for k, v in steps.items()
    }
    out["candidates_n"] = len(found.paths) if found else 0
    return out


# ------------------------------------------------------------------ the table


def verdict(kind: str, speedup: float) -> str:
    """Issue 18's targets: selective literals and identifiers at least 50x faster than
    ``rg -uu``, patterns with no trigram no slower."""
    if kind in ("literal", "identifier"):
        return f">= 50x {'PASS' if speedup >= 50 else 'FAIL'}"
    if kind == "none":
        return f">= 1x {'PASS' if speedup >= 1 else 'FAIL'}"
    return ""


def rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """The header and a row per pattern."""
    header = (
        "pattern", "kbindexd p50 / p99", "rg -uu p50", "x", "rg same files p50", "x",
        "candidates", "total", "complete", "= rg", "target",
    )  # fmt: skip
    out: list[tuple[str, ...]] = [header]
    for case in results["cases"]:
        r = case["measured"]
        k, rg = r["kbindexd"], r["rg"]
        same = r.get("rg_same_files")
        out.append(
            (
                f"{case['kind']}: {case['label']}",
                f"{k['p50_ms']:.1f} / {k['p99_ms']:.1f} ms",
                f"{rg['p50_ms']:.0f} ms",
                f"{rg['p50_ms'] / k['p50_ms']:.1f}x",
                f"{same['p50_ms']:.0f} ms" if same else "same",
                f"{same['p50_ms'] / k['p50_ms']:.1f}x" if same else "",
                f"{r['reply']['candidates']}/{results['indexed_files']}",
                str(r["reply"]["total"]),
                "yes" if r["reply"]["complete"] else "NO",
                "yes" if not r["mismatches"] and r["total_matches_rg"] else "NO",
                verdict(case["kind"], rg["p50_ms"] / k["p50_ms"]),
            )
        )
    return out


def table(results: dict[str, Any]) -> str:
    cells = rows(results)
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


def markdown(results: dict[str, Any]) -> str:
    cells = rows(results)
    md = ["| " + " | ".join(row) + " |" for row in cells]
    md.insert(1, "|" + " --- |" * len(cells[0]))
    return "\n".join(md)


def serial_s(results: dict[str, Any]) -> float:
    """The burst's requests one after another, each at its pattern's sequential p50."""
    b = results["burst"]
    p50 = [c["measured"]["kbindexd"]["p50_ms"] for c in results["cases"] if c["kind"] in SELECTIVE]
    each = b["requests"] // b["clients"]
    ms = sum(p50[(k + i) % len(p50)] for k in range(b["clients"]) for i in range(each))
    return float(ms) / 1e3


def summary(results: dict[str, Any]) -> list[str]:
    corpus = results["tree_bytes"]
    grams = sum(v for k, v in results["docs_grams_bytes"].items() if k != "data_blocks")
    out = [
        f"docs_grams: {grams / 1e6:.1f} MB = {grams / corpus:.3f}x the tree"
        f" ({corpus / 1e6:.0f} MB), {grams / results['indexed_bytes']:.3f}x the indexed files;"
        f" whole index {results['index_bytes'] / 1e6:.0f} MB"
        f" (target <= 0.35x: {'PASS' if grams / corpus <= 0.35 else 'FAIL'})"
    ]
    for run in results["full_index"]:
        out.append(
            f"full index {run['build']}: {run['wall_s']} s (CPU {run['cpu_s']} s, peak RSS"
            f" {run['peak_rss_mb']:.0f} MB, index {run['index_bytes'] / 1e6:.0f} MB,"
            f" load {run['load_before_after'][0]} -> {run['load_before_after'][1]})"
        )
    runs = results["full_index"]
    new = [r for r in runs if r["build"] == "new"]
    old = [r for r in runs if r["build"] == "old"]
    if old:
        # Each new run against the old run just before it: the VM drifts between pairs.
        for key in ("wall_s", "cpu_s"):
            ratios = [n[key] / o[key] for o, n in zip(old, new, strict=False)]
            mean = statistics.geometric_mean(ratios)
            out.append(
                f"new / old full-index {key[:-2]} per pair: "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + f"; throughput {1 / mean:.2f}x the old's (geometric mean)"
                + (
                    f" (target >= 0.75x: {'PASS' if 1 / mean >= 0.75 else 'FAIL'})"
                    if key == "wall_s"
                    else ""
                )
            )
    b = results.get("burst")
    if b:
        out.append(
            f"burst: {b['clients']} clients x {b['requests'] // b['clients']} selective greps:"
            f" p50 {b['p50_ms']} ms, p99 {b['p99_ms']} ms, all in {b['wall_s']} s"
            f" (one at a time, at the p50s above: {serial_s(results):.3f} s;"
            f" load {b['load_before_after'][0]})"
        )
    return out


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tree", type=Path, help="the tree to index (only read)")
    for kind in KINDS:
        p.add_argument(f"--{kind}", action="append", help=f"a {kind} pattern (repeat)")
    p.add_argument("--against", type=Path, help="another build's kbindexd, indexed in turn")
    p.add_argument("--pairs", type=int, default=2, help="old/new full-index pairs")
    p.add_argument("--reuse", type=Path, help="a kept work dir: skip the full index")
    p.add_argument("--rounds", type=int, default=5, help="rounds of (a), (b), (c)")
    p.add_argument("--greps", type=int, default=4, help="greps per round (fast patterns)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--burst", type=int, default=10, help="greps per client in the burst")
    p.add_argument("--rg", default="rg", help="the ripgrep measured against (default: PATH's)")
    p.add_argument("--breakdown", action="store_true", help="in-process time per step")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600.0, help="per full index, seconds")
    p.add_argument("--json", type=Path, help="results file (default bench/out/...json)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (state, logs)")
    args = p.parse_args(argv)
    global RG
    RG = args.rg
    tree = args.tree.resolve()
    if not tree.is_dir():
        p.error(f"not a directory: {tree}")

    work = args.reuse or Path(tempfile.mkdtemp(prefix="kbindex-grep-", dir="/tmp"))
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
        "tree": str(tree),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite.sqlite_version,
            "rg": version(RG),
            "daemon_rg": version(ripgrep.find()),
            "git": common.git("rev-parse", "--short", "HEAD").strip(),
            "load_before": load(),
        },
    }
    d = None
    try:
        print(f"{tree}: page cache warmed in {warm_cache(tree):.1f} s", flush=True)
        if args.reuse:
            d = common.start_daemon(tree, work, *DAEMON_OPTIONS, name="new")
            anyio.run(_wait_indexed, d, args.timeout)
            results["full_index"] = []
        else:
            d, results["full_index"] = index_runs(
                tree, work, args.against, args.pairs, args.timeout
            )
        db = d.state / "index.sqlite3"
        paths, results["indexed_bytes"] = indexed_files(db)
        results["indexed_files"] = len(paths)
        results["tree_bytes"] = sum(
            os.lstat(os.path.join(dp, n)).st_size for dp, _, ns in os.walk(tree) for n in ns
        )
        results["index_bytes"] = sum(disk_bytes(db))
        results["docs_grams_bytes"] = trigram_bytes(db)
        globs, unseen = excluded_globs(tree, paths)
        results["rg_files_not_indexed"] = len(globs)
        results["indexed_not_read_by_rg"] = unseen
        cases = pick(db, paths, args)
        results["cases"] = []
        with BlockingClient.connect(d.sock, client_name="grep_bench") as client:
            for case in cases:
                print(f"  {case.kind}: {case.label()} (load {load()})", flush=True)
                measured = measure_case(client, tree, case, globs, args)
                for problem in measured["mismatches"]:
                    print(f"    MISMATCH {problem}")
                if not measured["total_matches_rg"]:
                    print(
                        f"    total {measured['reply']['total']} against rg's"
                        f" {measured['rg_output']['same_files_lines']} lines"
                    )
                entry = {**asdict(case), "label": case.label(), "measured": measured}
                if args.breakdown:
                    entry["breakdown"] = breakdown(db, tree, case)
                    print(f"    in-process: {entry['breakdown']}")
                results["cases"].append(entry)
        selective = [c for c in cases if c.kind in SELECTIVE]
        results["burst"] = burst(d.sock, selective, args.clients, args.burst)
    finally:
        if d is not None:
            common.stop_daemon(d)
        if args.keep or args.reuse:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["machine"]["load_after"] = load()
    results["markdown"] = markdown(results)
    print(table(results))
    for line in summary(results):
        print(line)
    print(f"load average 1/5/15 min: {results['machine']['load_before']} -> {load()}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_results(results, args.json, HERE / "out" / f"grep_bench-{tree.name}-{stamp}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
