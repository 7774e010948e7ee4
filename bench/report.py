"""Figures and the printed table for index_bench.py: derived ratios and PASS/FAIL."""

from __future__ import annotations

import statistics
from typing import Any

TARGETS = {
    "full_index_vs_bare": (">=", 0.70, "full index throughput / bare FTS5"),
    "no_change_rescan_s": ("<", 1.5, "no-change rescan (refresh_wait median)"),
    "search_p50_ms": ("<", 5.0, "search p50 through the socket"),
}


def latency(values_ms: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values_ms, n=100, method="inclusive")
    return {
        "n": len(values_ms),
        "p50_ms": round(statistics.median(values_ms), 2),
        "p90_ms": round(cuts[89], 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(max(values_ms), 2),
        "mean_ms": round(statistics.fmean(values_ms), 2),
    }


def latencies(times: dict[str, list[float]]) -> dict[str, Any]:
    """Latency figures for every kind of query and for all of them together."""
    result: dict[str, Any] = {"all": latency([t for ts in times.values() for t in ts])}
    for kind, ts in times.items():
        result[kind] = latency(ts)
    return result


def summarize(r: dict[str, Any]) -> dict[str, Any]:
    mb = r["corpus"]["bytes"] / 1e6
    d, b = r["kbindexd"], r["bare_fts5"]
    wall, inner = d["full"]["wall_s"], d["full"]["last_scan_seconds"]
    values = {
        "full_index_vs_bare": round(mb / wall / b["mb_per_s"], 3),
        "no_change_rescan_s": d["rescan"]["median_s"],
        "search_p50_ms": d["search"]["all"]["p50_ms"],
    }
    checks = {}
    for key, (op, limit, label) in TARGETS.items():
        ok = values[key] >= limit if op == ">=" else values[key] < limit
        checks[key] = {"label": label, "value": values[key], "target": f"{op} {limit}", "pass": ok}
    return {
        "corpus_mb": round(mb, 1),
        "daemon_mb_per_s": round(mb / wall, 2),
        "indexer_mb_per_s": round(mb / inner, 2),
        "indexer_vs_bare": round(mb / inner / b["mb_per_s"], 3),
        "merged_vs_bare_merged": (
            round((b["seconds"] + b["merge"]["seconds"]) / wall, 3) if "merge" in b else None
        ),
        "cpu_over_bare": round(d["full"]["cpu_s"] / b["cpu_s"], 2),
        "index_over_corpus": round(d["index_bytes"] / r["corpus"]["bytes"], 3),
        "bare_index_over_corpus": round(b["index_bytes"] / r["corpus"]["bytes"], 3),
        "checks": checks,
    }


def _verdict(check: dict[str, Any]) -> str:
    return f"{check['target']:>8}  {'PASS' if check['pass'] else 'FAIL'}"


def _ms(v: dict[str, Any]) -> str:
    return f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f} ms"


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def table(r: dict[str, Any]) -> str:
    s, d, b, c = r["summary"], r["kbindexd"], r["bare_fts5"], r["corpus"]
    checks, search, full = s["checks"], d["search"], d["full"]
    inverted = sum(v for k, v in d["tables"].items() if k.endswith(("_data", "_idx")))
    rows = [
        ("corpus", f"{c['files']} files, {s['corpus_mb']} MB, {c['directories']} dirs", ""),
        (
            "full index, kbindexd (start -> scan done)",
            f"{full['wall_s']:.2f} s  {s['daemon_mb_per_s']:.2f} MB/s  (CPU {full['cpu_s']:.1f} s)",
            "",
        ),
        (
            "  indexer's own last_scan_seconds",
            f"{full['last_scan_seconds']:.2f} s  {s['indexer_mb_per_s']:.2f} MB/s",
            "",
        ),
        (
            "full index, bare FTS5 in-process",
            f"{b['seconds']:.2f} s  {b['mb_per_s']:.2f} MB/s  (CPU {b['cpu_s']:.1f} s)",
            "",
        ),
        (
            "kbindexd / bare throughput",
            f"{checks['full_index_vs_bare']['value']:.0%}  (indexer only: "
            f"{s['indexer_vs_bare']:.0%}); CPU time {s['cpu_over_bare']:.2f}x bare",
            _verdict(checks["full_index_vs_bare"]),
        ),
        (
            "  both merged into one segment",
            f"bare load + merge {b['seconds'] + b['merge']['seconds']:.2f} s: kbindexd / bare "
            f"{s['merged_vs_bare_merged']:.0%}"
            if "merge" in b
            else "(not measured)",
            "",
        ),
        (
            "index size / corpus size",
            f"{s['index_over_corpus']:.2f}x  ({_mb(d['index_bytes'])}; bare "
            f"{s['bare_index_over_corpus']:.2f}x, {_mb(b['index_bytes'])})",
            "",
        ),
        (
            "  kbindexd: stored text / inverted indexes",
            f"{_mb(d['tables'].get('docs_content', 0))} / {_mb(inverted)}",
            "",
        ),
        (
            "no-change rescan, refresh_wait median",
            f"{d['rescan']['median_s']:.3f} s  (of {d['rescan']['client_s']})",
            _verdict(checks["no_change_rescan_s"]),
        ),
        (
            "  daemon last_scan_seconds",
            f"periodic {d['periodic_rescan_s']:.3f} s; requested "
            f"{statistics.median(d['rescan']['daemon_last_scan_seconds']):.3f} s",
            "",
        ),
        ("ping p50 / p99 (transport floor)", _ms(d["ping"]), ""),
        (
            f"search p50 / p99, {search['all']['n']} queries",
            f"{_ms(search['all'])}  (bare FTS5: {_ms(b['search']['all'])})",
            _verdict(checks["search_p50_ms"]),
        ),
        (
            "  per query, kbindexd / bare (median)",
            f"{search.get('median_ratio_to_bare', float('nan')):.2f}x  (bare in-process, "
            "run just before each socket query)",
            "",
        ),
    ]
    for st in r.get("breakdown", []):
        extra = f"; tokens.* {st['derived_columns_s']:.1f} s" if "derived_columns_s" in st else ""
        rows.append(
            (
                f"  bare.py stage {st['stage']}",
                f"{st['seconds']:.2f} s  {st['mb_per_s']:.2f} MB/s  "
                f"{st['mb_per_s'] / b['mb_per_s']:.0%} of bare  (CPU {st['cpu_s']:.1f} s"
                f"{extra}; {_mb(st['index_bytes'])})",
                "",
            )
        )
    for kind, v in search.items():
        if kind not in ("all", "overlapped_a_scan", "median_ratio_to_bare"):
            hits = f"median hits {v['median_total_hits']:g}"
            rows.append((f"  {kind}", f"{_ms(v)}  (bare: {_ms(b['search'][kind])}; {hits})", ""))
    if search["overlapped_a_scan"]:
        rows.append(("  WARNING", "a scan ran during the search phase", ""))
    rows.append(("kbindexd peak RSS (VmHWM)", f"{d['peak_rss_mb']:.0f} MB", ""))
    loads = r["machine"]["loadavg_before_after"]
    rows.append(
        (
            "load average 1/5/15 min (daemon phase)",
            " -> ".join("/".join(f"{x:.2f}" for x in la) for la in loads),
            "",
        )
    )
    width = max(len(a) for a, _, _ in rows)
    vwidth = max(len(v) for _, v, _ in rows)
    lines = [f"{'metric':<{width}}  {'value':<{vwidth}}  {'target':>8}"]
    lines.append("-" * (width + vwidth + 16))
    lines += [f"{a:<{width}}  {v:<{vwidth}}  {t}".rstrip() for a, v, t in rows]
    return "\n".join(lines)
