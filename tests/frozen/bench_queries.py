"""Writes bench_queries.json: the 400 queries of bench/search_ab.py (index_bench's mix
over the default corpus, same seed), for test_query_plan.py to render.

    .venv/bin/python tests/frozen/bench_queries.py

Builds the bench corpus under /tmp first if it is not there (bench/corpus.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "bench"))

import corpus  # noqa: E402
import index_bench  # noqa: E402


def main() -> None:
    files, mb, seed = 20_000, 200.0, corpus.DEFAULT_SEED  # search_ab.py's defaults
    manifest = corpus.build(corpus.default_out(files, mb, seed), files, mb, seed)
    queries = index_bench.make_queries(manifest["queries"], 80, seed)
    out = HERE / "bench_queries.json"
    out.write_text(json.dumps([q for _, q in queries], ensure_ascii=False, indent=0) + "\n")


if __name__ == "__main__":
    main()
