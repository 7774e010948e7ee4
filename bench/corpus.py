"""A synthetic, deterministic corpus for the kbindex benchmark.

Prose (.md, .txt, .rst: headings, paragraphs, lists) and Python-like code (.py) in about
200 nested directories. Words are made-up syllable strings (plus English function words
at the top ranks) drawn with Zipfian frequencies, so the index sees a long tail of rare
terms the way it does on real notes. File sizes follow a log-normal distribution scaled
to the requested total.

Speed: words are sampled once into pools of sentences, paragraphs and code blocks;
files are assembled by picking from the pools, so 200 MB takes seconds, not minutes.
The same (files, mb, seed) always gives byte-identical files. A manifest next to the
corpus (``OUT.manifest.json``, outside the indexed tree) records the parameters and the
query material the benchmark uses; an existing corpus with a matching manifest is reused.

    python bench/corpus.py --out /tmp/kbindex-bench/corpus --files 2000 --mb 20
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_FILES = 20_000
DEFAULT_MB = 200.0
DEFAULT_SEED = 1
DEFAULT_ROOT = Path("/tmp/kbindex-bench")
REPO = Path(__file__).resolve().parent.parent
FORMAT = 1  # bump when the generator changes, so old corpora are rebuilt

FUNCTION_WORDS = str.split(
    "the of and to a in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "if so no will more can who what into some than its only other then also how does"
)
ONSETS = str.split(
    "b c d f g h j k l m n p r s t v w z b c d k l m n p r s t br ch cl dr gr pl st th tr"
)
NUCLEI = str.split("a e i o u a e i o u ai ea ee oo ou")
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"]
SUFFIXES = ["", "", "", "", "s", "ing", "ed", "er", "ation", "ly", "ness", "able"]
VOCABULARY = 60_000
ZIPF_EXPONENT = 1.05
KINDS = (("md", 0.45), ("txt", 0.20), ("rst", 0.10), ("py", 0.25))


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """``size`` distinct words, most frequent first (and, as in real text, mostly shorter)."""
    seen = set(FUNCTION_WORDS)
    made: list[tuple[float, str]] = []
    while len(made) < size - len(FUNCTION_WORDS):
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        stem = "".join(
            rng.choice(ONSETS) + rng.choice(NUCLEI) + rng.choice(CODAS) for _ in range(syllables)
        )
        word = stem + rng.choice(SUFFIXES)
        if word not in seen:
            seen.add(word)
            made.append((len(word) + rng.gauss(0.0, 3.0), word))
    made.sort()
    return list(FUNCTION_WORDS) + [w for _, w in made]


class Pools:
    """Sentences, paragraphs and code blocks sampled once from the Zipfian vocabulary."""

    def __init__(self, rng: random.Random) -> None:
        self.words = vocabulary(rng, VOCABULARY)
        cum = list(
            itertools.accumulate(1.0 / (r + 2.7) ** ZIPF_EXPONENT for r in range(VOCABULARY))
        )
        lengths = [rng.randint(4, 24) for _ in range(150_000)]
        stream = rng.choices(self.words, cum_weights=cum, k=sum(lengths))
        self.sentences: list[str] = []
        at = 0
        for n in lengths:
            chunk = stream[at : at + n]
            at += n
            self.sentences.append(chunk[0].capitalize() + " " + " ".join(chunk[1:]) + ".")
        self.stream = stream
        self.paragraphs = [
            " ".join(rng.choices(self.sentences, k=rng.randint(2, 8))) for _ in range(40_000)
        ]
        self.headings = [
            " ".join(rng.choices(self.words[:5000], k=rng.randint(2, 6))) for _ in range(20_000)
        ]
        self.idents = [
            "_".join(rng.choices(self.words[60:8000], k=rng.randint(1, 3))) for _ in range(20_000)
        ]
        self.code_blocks = [self._function(rng) for _ in range(15_000)]

    def _function(self, rng: random.Random) -> str:
        name, a, b, c = rng.choices(self.idents, k=4)
        doc = rng.choice(self.sentences)
        comment = rng.choice(self.sentences)
        n = rng.randint(0, 999)
        body = [
            f"def {name}({a}, {b}=None):",
            f'    """{doc}"""',
            f"    # {comment}",
            f"    {c} = {a}.get({b!r}, {n})" if rng.random() < 0.5 else f"    {c} = {a} + {n}",
            f"    if {b} is not None and {c} > {n // 2}:",
            f"        return {b}({c})",
            f"    for item in {a}:",
            f"        {c} += len(item)",
            f"    return {c}",
        ]
        return "\n".join(body) + "\n\n"


def _prose(pools: Pools, rng: random.Random, kind: str, target: int) -> str:
    title = pools.headings[rng.randrange(len(pools.headings))].capitalize()
    if kind == "md":
        parts = [f"# {title}\n\n"] if rng.random() < 0.8 else [f"---\ntitle: {title}\n---\n\n"]
    elif kind == "rst":
        parts = [f"{title}\n{'=' * len(title)}\n\n"]
    else:
        parts = [f"{title}\n\n"]
    size = len(parts[0])
    while size < target:
        roll = rng.random()
        if roll < 0.12:
            heading = rng.choice(pools.headings).capitalize()
            if kind == "rst":
                block = f"{heading}\n{'-' * len(heading)}\n\n"
            else:
                block = f"## {heading}\n\n" if kind == "md" else f"{heading.upper()}\n\n"
        elif roll < 0.20:
            items = rng.choices(pools.sentences, k=rng.randint(2, 6))
            block = "".join(f"- {s}\n" for s in items) + "\n"
        else:
            block = rng.choice(pools.paragraphs) + "\n\n"
        parts.append(block)
        size += len(block)
    return "".join(parts)


def _code(pools: Pools, rng: random.Random, target: int) -> str:
    mods = rng.choices(pools.idents, k=3)
    parts = [
        f'"""{rng.choice(pools.sentences)}"""\n\nimport os\nfrom {mods[0]} import {mods[1]}\n\n'
        f"{mods[2].upper()} = {rng.randint(1, 9999)}\n\n\n"
    ]
    size = len(parts[0])
    while size < target:
        block = rng.choice(pools.code_blocks)
        parts.append(block)
        size += len(block)
    return "".join(parts)


def _directories(rng: random.Random, count: int) -> list[str]:
    """``count`` relative directory paths, nested up to three levels."""
    dirs: list[str] = []
    top = max(1, count // 21)
    for i in range(top):
        dirs.append(f"area-{i:02d}")
    while len(dirs) < count:
        parent = rng.choice(dirs)
        if parent.count("/") < 2:
            dirs.append(f"{parent}/{rng.choice(('notes', 'docs', 'src', 'misc'))}-{len(dirs):03d}")
    return dirs


def _sizes(rng: random.Random, files: int, total: int) -> list[int]:
    raw = [rng.lognormvariate(0.0, 1.0) for _ in range(files)]
    scale = total / sum(raw)
    return [min(max(200, int(r * scale)), 2 << 20) for r in raw]


def _query_material(pools: Pools, rng: random.Random) -> dict[str, list[str]]:
    counts: dict[str, int] = {}
    for w in pools.stream:
        counts[w] = counts.get(w, 0) + 1
    content = [w for w in pools.words if w not in FUNCTION_WORDS and len(w) >= 4]
    rare = [w for w in content[20_000:] if 2 <= counts.get(w, 0) <= 4]
    phrases = []
    for s in rng.sample(pools.sentences, 400):
        tokens = s.rstrip(".").lower().split()
        pairs = [p for p in itertools.pairwise(tokens) if not set(p) <= set(FUNCTION_WORDS)]
        if pairs:
            phrases.append(" ".join(rng.choice(pairs)))
    return {
        "common": content[:100],
        "middle": content[300:3000],
        "rare": rng.sample(rare, min(400, len(rare))),
        "phrases": phrases,
    }


def build(out: Path, files: int, mb: float, seed: int, *, force: bool = False) -> dict[str, Any]:
    """Generate the corpus in ``out`` (or reuse a matching one) and return its manifest."""
    out = out.resolve()
    if out == REPO or REPO in out.parents:
        raise SystemExit(f"corpus.py: refusing to write a corpus inside the repository ({out})")
    manifest_path = Path(f"{out}.manifest.json")
    params = {"format": FORMAT, "files": files, "mb": mb, "seed": seed}
    if not force and out.is_dir() and manifest_path.exists():
        manifest: dict[str, Any] = json.loads(manifest_path.read_text())
        if manifest.get("params") == params:
            return manifest
    started = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)
    rng = random.Random(seed)
    pools = Pools(rng)
    dirs = _directories(rng, 200)
    for d in dirs:
        (out / d).mkdir(parents=True, exist_ok=True)
    sizes = _sizes(rng, files, int(mb * 1_000_000))
    kinds, weights = zip(*KINDS, strict=True)
    total = 0
    by_kind: dict[str, int] = {}
    for i, target in enumerate(sizes):
        kind = rng.choices(kinds, weights)[0]
        text = _code(pools, rng, target) if kind == "py" else _prose(pools, rng, kind, target)
        data = text.encode()
        (
            out / rng.choice(dirs) / f"{pools.idents[i % len(pools.idents)][:40]}-{i:05d}.{kind}"
        ).write_bytes(data)
        total += len(data)
        by_kind[kind] = by_kind.get(kind, 0) + 1
    manifest = {
        "params": params,
        "path": str(out),
        "files": files,
        "bytes": total,
        "directories": len(dirs),
        "by_kind": by_kind,
        "generated_in_seconds": round(time.perf_counter() - started, 2),
        "queries": _query_material(pools, rng),
    }
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def default_out(files: int, mb: float, seed: int) -> Path:
    return DEFAULT_ROOT / f"corpus-{files}f-{mb:g}mb-s{seed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="corpus directory (default under /tmp)")
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--mb", type=float, default=DEFAULT_MB)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--force", action="store_true", help="regenerate even if it exists")
    args = parser.parse_args(argv)
    out = args.out or default_out(args.files, args.mb, args.seed)
    m = build(out, args.files, args.mb, args.seed, force=args.force)
    print(
        f"{m['path']}: {m['files']} files, {m['bytes'] / 1e6:.1f} MB, {m['directories']} dirs "
        f"{m['by_kind']} (generated in {m['generated_in_seconds']} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
