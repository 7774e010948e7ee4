"""A search's hits: the index ranks the documents, and each hit shows the passage of
its text that matched best (``passages``). The text is the index's copy or the file
as it is now (``Index.records``): no backend makes snippets."""

from __future__ import annotations

from kbindex.daemon.index.interface import Index
from kbindex.daemon.index.plan import Plan
from kbindex.daemon.index.values import Hit, SearchResult
from kbindex.daemon.searching import passages


def search(index: Index, plan: Plan) -> SearchResult:
    """The best ``plan.limit`` hits of ``plan``, best first, each with its snippet."""
    ranked, total, mode = index.rank(plan)
    found = {record.id: record for record in index.records([i for i, _ in ranked])}
    hits = []
    for file_id, score in ranked:
        record = found.get(file_id)
        if record is None:
            continue  # removed since it was ranked
        snippet, line = passages.shown(record.body or "", plan.needles)
        f = record.file
        hits.append(
            Hit(f.path, f.root, f.relpath, f.size, f.mtime_ns, record.title, round(score, 4),
                snippet, line, machine=f.machine)
        )  # fmt: skip
    return SearchResult(hits, total, mode)
