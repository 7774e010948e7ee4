"""grams.of_text: a document's distinct byte trigrams, as grep's index holds them."""

from __future__ import annotations

import random

from kbindex.daemon.indexing import grams


def windows(data: bytes) -> set[str]:
    return {data[i : i + 3].hex() for i in range(len(data) - 2)}


def test_the_tokens_are_every_distinct_three_byte_window_folded() -> None:
    rng = random.Random(3)
    alphabet = "abcABC xyz\n\t_é中ß\u212a"
    # Many documents one after another: the scratch table keeps earlier documents'
    # positions, and none of them may leak into a later document's set.
    for n in [0, 1, 2, 3, 4, 50, 5000, 3, 200]:
        text = "".join(rng.choice(alphabet) for _ in range(n))
        tokens = grams.of_text(text, "utf-8").split()
        assert len(tokens) == len(set(tokens))
        assert set(tokens) == windows(text.encode("utf-8").lower())


def test_a_cp1252_file_is_indexed_by_its_own_bytes() -> None:
    text = "caf\u00e9 cr\u00e8me"
    assert set(grams.of_text(text, "cp1252").split()) == windows(text.encode("cp1252"))


def test_a_text_past_64_kb_keeps_every_trigram_once() -> None:
    # Positions 65,536 apart write the same number into the scratch table: both read
    # it back, and the duplicates must go.
    rng = random.Random(11)
    block = "".join(rng.choice("abAB _\n") for _ in range(1 << 16))
    text = block + block[:5000] + "".join(rng.choice("xyzé") for _ in range(70_000))
    found = grams.of_text(text, "utf-8").split()
    assert len(found) == len(set(found))
    data = text.encode().lower()
    assert set(found) == {data[i : i + 3].hex() for i in range(len(data) - 2)}
