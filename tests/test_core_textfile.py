"""Text detection, decoding, titles and line slicing (pure functions)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kbindex.daemon.indexing.textfile import Loaded, Skipped, decode, extract_title, line_slice


def test_decoding_and_detection() -> None:
    assert isinstance(decode("héllo".encode(), 6, 0), Loaded)
    assert decode("\ufeffbom".encode("utf-8"), 6, 0).encoding == "utf-8-sig"  # type: ignore[union-attr]
    assert decode("caf\xe9".encode("cp1252"), 4, 0).encoding == "cp1252"  # type: ignore[union-attr]
    binary = decode(b"abc\x00def", 7, 0)
    assert isinstance(binary, Skipped) and binary.reason == "binary"
    controls = decode(bytes(range(1, 9)) * 100, 800, 0)
    assert isinstance(controls, Skipped) and controls.reason == "binary"


def test_titles() -> None:
    assert extract_title("---\ntitle: 'Front matter'\n---\n# Heading\n") == "Front matter"
    assert extract_title("intro\n\n# The heading ##\nbody") == "The heading"
    assert extract_title("no heading here\n#hashtag") == ""
    assert extract_title("#hashtag\n#\n# \n#\tTabbed # \n# Later") == "Tabbed"
    assert extract_title("x" * 4000 + "\n# cut off past the scanned head") == ""


@pytest.mark.parametrize(
    ("name", "text", "title"),
    [
        # A comment is never a title: Python's is its module docstring's first line.
        (
            "tool.py",
            '# flake8: noqa\n"""Frobnicate widgets.\n\nMore.\n"""\n',
            "Frobnicate widgets.",
        ),
        (
            "tool.py",
            "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n\n'''\n  Spaced.\n'''",
            "Spaced.",
        ),
        ("tool.py", "# flake8: noqa\nimport os\n", ""),
        ("tool.py", 'import os\n"""not the first statement"""\n', ""),
        ("run.sh", "# Copyright Example Corp\necho hi\n", ""),
        ("CMakeLists", "# Copyright\n", ""),
        # reStructuredText: the first underlined section title.
        ("guide.rst", ".. comment\n\n=====\nGuide\n=====\n\ntext\n", "Guide"),
        ("guide.rst", "Intro\n-----\n", "Intro"),
        ("guide.rst", "# not a heading in rst\n", ""),
        # Markdown and plain-text notes as before.
        ("note.md", "---\ntitle: Front\n---\n# Heading\n", "Front"),
        ("note.txt", "# Heading\n", "Heading"),
    ],
)
def test_a_title_is_what_its_kind_of_file_calls_one(name: str, text: str, title: str) -> None:
    assert extract_title(text, name) == title
    loaded = decode(text.encode(), len(text), 0, f"/root/{name}")
    assert isinstance(loaded, Loaded) and loaded.title == title


@given(st.lists(st.sampled_from(["#", "# ", "#\t", " ", "x", "\n", "##", "T", "\r"]), max_size=40))
def test_the_title_is_the_first_heading_line(pieces: list[str]) -> None:
    text = "".join(pieces)
    first = re.search(r"^#[ \t]+(.+?)[ \t#]*$", text, re.MULTILINE)
    assert extract_title(text) == (first.group(1) if first else "")


def test_line_slice_ranges_and_budget() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 11))
    out, first, last, total, truncated = line_slice(text, 3, 5, 10_000)
    assert out.splitlines() == ["3| line 3", "4| line 4", "5| line 5"]
    assert (first, last, total, truncated) == (3, 5, 10, False)
    out, first, last, total, truncated = line_slice(text, None, None, 40)
    assert truncated and last == len(out.splitlines()) and last < 10
    assert line_slice(text, 20, None, 100)[0] == ""


def test_line_longer_than_budget_is_cut_not_dropped() -> None:
    out, first, last, _total, truncated = line_slice("x" * 500 + "\nnext", 1, None, 100)
    assert truncated and (first, last) == (1, 1)
    assert out.startswith("1| xxx") and out.endswith("…") and len(out) == 100
