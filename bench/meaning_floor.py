"""Where relevant and irrelevant passages fall by similarity, and what a floor on it does.

Reads a daemon's state folder after it embedded everything (the vectors file and the
index, in-process; nothing is embedded again) and, for every query, the cosine
similarity of each file's best passage (exact, the daemon's ``Matrix``) and the word
ranking the daemon fuses with it (``Index.rank``, mode auto, best 100).

``scifact WORK`` (a folder ``eval_scifact.py --mode hybrid --work WORK`` left): the
similarity of each relevant document (train qrels) against the best irrelevant ones;
nonsense words (no document holds them) and off-topic questions, which have no
relevant document; then for each floor: the share of relevant documents that clear it,
the share of irrelevant candidates (the vector side's best 100) it drops, how many
nonsense queries it answers with nothing, and nDCG@10 / Recall@100 of the fusion
(``hybrid.fuse``) with that floor, and the same on two folds of the queries (odd and
even ids) to show the choice does not only fit the queries it was chosen on.

``tree STATE --queries FILE``: a mixed folder of notes, docs and code embedded by a
daemon (``meaning_memory.py TREE --work WORK`` leaves WORK/state); FILE is JSON:
``{"judged": {"query": ["relpath", ...]}, "nonsense": [...], "offtopic": [...]}``.
The rank and similarity of each judged file, the best similarity of every other query,
and for each floor how many files the judged queries and the others would list.

    .venv/bin/python bench/meaning_floor.py scifact /tmp/scifact-work [--json OUT]
    .venv/bin/python bench/meaning_floor.py tree /tmp/mixed-work/state --queries Q.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from eval_scifact import DATASET, ndcg_at, read_qrels, read_queries, recall_at
from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.engine import sqlite
from kbindex.daemon.searching import hybrid
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.semantic.embedder import matrix_of
from kbindex.daemon.semantic.encoder import Encoder
from kbindex.daemon.semantic.vectors import VectorFile

FLOORS = [round(0.10 + 0.025 * i, 3) for i in range(17)]
NONSENSE = [
    "quuxplorator",
    "zorbleflax",
    "snargleblat",
    "vrimptozz",
    "glorbulent",
    "fwoompish",
    "blorptastic",
    "plumbuzzle wextrinator",
    "grindlewock frabjous",
    "xqzvy",
]
OFFTOPIC = [
    "tar",
    "guitar chords for beginners",
    "sourdough starter",
    "git rebase interactive",
    "cat litter box",
    "football world cup final",
    "python decorator syntax",
    "tram in lisbon",
    "how to fix a flat bicycle tyre",
    "ssh key ed25519",
    "kubernetes pod restart",
    "mortgage interest rates",
]


def random_words(count: int, seed: int = 37) -> list[str]:
    """Made-up words of 6 to 12 letters: no document holds them."""
    rng = random.Random(seed)
    return [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(6, 12)))
        for _ in range(count)
    ]


class State:
    """A daemon's state folder opened for reading: the model, the vectors, the index."""

    def __init__(self, state: Path) -> None:
        self.encoder = Encoder()
        self.encoder.load()
        vectors = VectorFile(state / "vectors.sqlite3")
        vectors.open(self.encoder.name, self.encoder.dim)
        self.matrix = matrix_of(vectors, self.encoder.dim)
        vectors.close()
        self.index = SqliteIndex(state / "index.sqlite3")
        self.index.open()
        conn = sqlite.connect(state / "index.sqlite3")
        self.relpath = dict(conn.execute("SELECT id, relpath FROM files").fetchall())
        conn.close()
        self.files = len(self.relpath)

    def similarities(self, text: str) -> dict[int, float]:
        """Each embedded file's best passage similarity to the query."""
        query = self.encoder.embed_query(text)
        found = self.matrix.search(query, self.files).nearest
        return {p.file_id: p.score for p in found}

    def words(self, text: str) -> tuple[list[tuple[int, float]], int]:
        ranked, total, _ = self.index.rank(to_plan(text, "auto", limit=hybrid.CANDIDATES))
        return ranked, total


def pct(values: list[float], qs: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9)):
    if not values:
        return {}
    arr = np.array(values)
    return {f"p{round(q * 100, 1):g}": round(float(np.quantile(arr, q)), 3) for q in qs}


Fuse = Callable[[list[tuple[int, float]], dict[int, float], list[tuple[int, float]]], list[int]]


def fused(floor: float | None, alpha: float = hybrid.ALPHA) -> Fuse:
    """The daemon's fusion (``hybrid.fuse``) with this floor (None: the one before it,
    min-max of the vector side over the whole index, no floor)."""

    def ranking(
        words: list[tuple[int, float]], sims: dict[int, float], nearest: list[tuple[int, float]]
    ) -> list[int]:
        if floor is None:
            return _before(words, sims, nearest)
        scored = hybrid.fuse(words, nearest, sims, floor=floor, alpha=alpha)
        return [i for i, _ in scored]

    return ranking


def _before(
    words: list[tuple[int, float]], sims: dict[int, float], nearest: list[tuple[int, float]]
) -> list[int]:
    """The fusion before the floor: the vector side normalised over the range of the
    whole index (lowest passage to nearest), bm25 min-max over the word list."""
    lexical = dict(words)
    if lexical:
        low, high = min(lexical.values()), max(lexical.values())
        lexical = {i: (s - low) / (high - low) if high > low else 1.0 for i, s in lexical.items()}
    top, lowest = (nearest[0][1], min(sims.values())) if sims else (0.0, 0.0)
    span = top - lowest
    wanted = {*lexical, *(i for i, _ in nearest)}
    semantic = {i: (sims[i] - lowest) / span if span > 0 else 1.0 for i in wanted if i in sims}
    scores = {
        i: 0.7 * semantic.get(i, lexical.get(i, 0.0)) + 0.3 * lexical.get(i, 0.0) for i in wanted
    }
    return sorted(scores, key=lambda i: (-scores[i], i))


def scifact(args: argparse.Namespace) -> dict[str, Any]:
    state = State(args.work / "state")
    doc_of = {i: Path(p).stem for i, p in state.relpath.items()}
    queries = read_queries(args.dataset, "train")
    qrels = read_qrels(args.dataset, "train")
    queries = {q: t for q, t in queries.items() if q in qrels}
    per_query: dict[
        str, tuple[list[tuple[int, float]], dict[int, float], list[tuple[int, float]]]
    ] = {}
    relevant_sims: list[float] = []
    best_irrelevant: list[float] = []
    irrelevant_top100: list[float] = []
    for qid, text in queries.items():
        sims = state.similarities(text)
        nearest = sorted(sims.items(), key=lambda kv: -kv[1])[: hybrid.CANDIDATES]
        per_query[qid] = (state.words(text)[0], sims, nearest)
        rel = qrels[qid]
        relevant_sims += [s for i, s in sims.items() if doc_of[i] in rel]
        others = sorted((s for i, s in sims.items() if doc_of[i] not in rel), reverse=True)
        best_irrelevant.append(others[0])
        irrelevant_top100 += others[: hybrid.CANDIDATES]
    nonsense = NONSENSE + random_words(40)
    noise_top = {q: max(state.similarities(q).values()) for q in nonsense}
    offtopic_top = {q: max(state.similarities(q).values()) for q in OFFTOPIC}
    out: dict[str, Any] = {
        "queries": len(queries),
        "relevant": pct(relevant_sims),
        "best_irrelevant_per_query": pct(best_irrelevant),
        "irrelevant_in_vector_top100": pct(irrelevant_top100, (0.5, 0.9, 0.99)),
        "nonsense_top1": pct(list(noise_top.values()), (0.5, 0.9, 1.0)),
        "nonsense_examples": {q: round(s, 3) for q, s in list(noise_top.items())[:12]},
        "offtopic_top1": {q: round(s, 3) for q, s in offtopic_top.items()},
    }
    folds = {
        "odd": [q for q in queries if int(q) % 2],
        "even": [q for q in queries if not int(q) % 2],
    }

    def quality(fuse: Fuse, ids: list[str]) -> tuple[float, float]:
        ranked = {q: [doc_of[i] for i in fuse(*per_query[q])][:100] for q in ids}
        return (
            round(statistics.fmean(ndcg_at(ranked[q], qrels[q], 10) for q in ids), 4),
            round(statistics.fmean(recall_at(ranked[q], qrels[q], 100) for q in ids), 4),
        )

    out["before"] = {"all": quality(fused(None), list(queries))} | {
        name: quality(fused(None), ids) for name, ids in folds.items()
    }
    rows = []
    for floor in FLOORS:
        kept = sum(s >= floor for s in relevant_sims) / len(relevant_sims)
        dropped = sum(s < floor for s in irrelevant_top100) / len(irrelevant_top100)
        silent = sum(s < floor for s in noise_top.values())
        row = {
            "floor": floor,
            "relevant_kept": round(kept, 4),
            "irrelevant_dropped": round(dropped, 4),
            "nonsense_answered_nothing": f"{silent}/{len(noise_top)}",
            "offtopic_answered_nothing": f"{sum(s < floor for s in offtopic_top.values())}"
            f"/{len(offtopic_top)}",
            "all": quality(fused(floor), list(queries)),
        }
        row |= {name: quality(fused(floor), ids) for name, ids in folds.items()}
        rows.append(row)
    out["floors"] = rows
    if args.alphas:
        out["alphas"] = {
            str(a): {f: quality(fused(f, a), list(queries)) for f in (0.3, 0.35, 0.4)}
            for a in args.alphas
        }
    return out


def tree(args: argparse.Namespace) -> dict[str, Any]:
    state = State(args.state)
    spec = json.loads(args.queries.read_text(encoding="utf-8"))
    judged: dict[str, list[str]] = spec["judged"]
    out: dict[str, Any] = {"files": state.files, "passages": state.matrix.passages}
    rows = {}
    relevant: list[float] = []
    top_others: list[float] = []
    for text, wanted in judged.items():
        sims = state.similarities(text)
        order = sorted(sims, key=lambda i: -sims[i])
        rank = {state.relpath[i]: n + 1 for n, i in enumerate(order)}
        score = {state.relpath[i]: round(s, 3) for i, s in sims.items()}
        found = [(w, rank.get(w), score.get(w)) for w in wanted]
        relevant += [s for _, _, s in found if s is not None]
        best_other = next(sims[i] for i in order if state.relpath[i] not in wanted)
        top_others.append(best_other)
        rows[text] = {"judged": found, "best_other": round(best_other, 3)}
    out["judged"] = rows
    out["relevant"] = pct(relevant)
    out["best_other_per_judged_query"] = pct(top_others)
    groups = {"nonsense": spec.get("nonsense", []) + random_words(30), "offtopic": spec["offtopic"]}
    tops: dict[str, dict[str, float]] = {}
    for name, texts in groups.items():
        tops[name] = {}
        for text in texts:
            sims = state.similarities(text)
            best = max(sims, key=lambda i: sims[i])
            tops[name][text] = sims[best]
            out.setdefault(f"{name}_examples", {})[text] = (
                round(sims[best], 3),
                state.relpath[best],
            )
        out[f"{name}_top1"] = pct(list(tops[name].values()), (0.5, 0.9, 1.0))
    out["floors"] = [
        {
            "floor": f,
            "judged_kept": f"{sum(s >= f for s in relevant)}/{len(relevant)}",
            "nonsense_answered_nothing": f"{sum(s < f for s in tops['nonsense'].values())}"
            f"/{len(tops['nonsense'])}",
            "offtopic_answered_nothing": f"{sum(s < f for s in tops['offtopic'].values())}"
            f"/{len(tops['offtopic'])}",
        }
        for f in FLOORS
    ]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scifact")
    s.add_argument("work", type=Path)
    s.add_argument("--dataset", type=Path, default=DATASET)
    s.add_argument("--alphas", type=lambda v: [float(a) for a in v.split(",")], default=[])
    t = sub.add_parser("tree")
    t.add_argument("state", type=Path)
    t.add_argument("--queries", type=Path, required=True)
    for q in (s, t):
        q.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    out = scifact(args) if args.what == "scifact" else tree(args)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
