"""How documents are cut into the passages that are embedded (daemon/semantic/chunks.py)."""

from __future__ import annotations

from kbindex.daemon.semantic import chunks

NOTE = """# Garden notes

Tomatoes need six hours of sun.
Water them at the base.

## Pests

Aphids gather under the leaves; spray them off with water.

## Harvest

Pick when the fruit is fully red.
"""


def test_a_note_is_cut_at_its_headings_with_the_lines_of_each_section() -> None:
    found = chunks.split("garden.md", "Garden notes", NOTE)
    assert [(c.start, c.end) for c in found] == [(1, 4), (6, 8), (10, 12)]
    lines = NOTE.splitlines()
    for c in found:
        assert lines[c.start - 1] in c.text
        assert lines[c.end - 1] in c.text


def test_each_passage_carries_the_title_and_is_read_with_its_heading() -> None:
    found = chunks.split("garden.md", "Garden notes", NOTE)
    assert found[0].text.startswith("# Garden notes")  # the title is already there
    assert found[1].text.startswith("Garden notes\n## Pests")
    assert "Aphids" in found[1].text


def test_keys_depend_on_the_text_only_so_a_moved_file_keeps_them() -> None:
    here = chunks.split("a/garden.md", "Garden notes", NOTE)
    there = chunks.split("b/renamed.md", "Garden notes", NOTE)
    assert [c.key for c in here] == [c.key for c in there]


def test_an_edit_changes_the_key_of_the_edited_passage_only() -> None:
    before = chunks.split("garden.md", "Garden notes", NOTE)
    after = chunks.split("garden.md", "Garden notes", NOTE.replace("fully red", "deep red"))
    changed = [b.key != a.key for b, a in zip(before, after, strict=True)]
    assert changed == [False, False, True]


def test_code_is_cut_at_blank_lines_into_passages_of_bounded_size() -> None:
    functions = [
        f"def handler_{i}(request):\n    value = request.get('k{i}')\n    return value * {i}\n"
        for i in range(60)
    ]
    text = "\n".join(functions)
    found = chunks.split("src/handlers.py", "", text)
    assert len(found) > 1
    assert all(len(c.text) <= chunks.TARGET_CHARS + 200 for c in found)
    assert found[0].start == 1
    assert found[-1].end == len(text.splitlines())
    # A passage never starts on a blank line, and together they cover every function.
    lines = text.splitlines()
    assert all(lines[c.start - 1].strip() for c in found)
    assert all(any(f"def handler_{i}(" in c.text for c in found) for i in range(60))


def test_a_heading_inside_code_is_not_a_section() -> None:
    text = "x = 1\n# a comment, not a heading\ny = 2\n"
    found = chunks.split("a.py", "", text)
    assert len(found) == 1
    assert (found[0].start, found[0].end) == (1, 3)


def test_a_restructuredtext_title_starts_a_section() -> None:
    text = "Intro text here.\n\nInstall\n=======\n\nRun the installer.\n"
    found = chunks.split("guide.rst", "", text)
    assert [(c.start, c.end) for c in found] == [(1, 1), (3, 6)]


def test_a_huge_file_gives_at_most_max_chunks_and_a_huge_line_is_cut() -> None:
    text = "\n\n".join("word " * 300 for _ in range(chunks.MAX_CHUNKS * 2))
    assert len(chunks.split("big.txt", "", text)) == chunks.MAX_CHUNKS
    one_line = "x" * 1_000_000
    pieces = chunks.split("min.js", "", one_line)
    assert sum(len(c.text) for c in pieces) == chunks.MAX_LINE_CHARS


def test_empty_and_blank_documents_have_no_passages() -> None:
    assert chunks.split("empty.md", "", "") == []
    assert chunks.split("blank.md", "", "\n  \n\t\n") == []


def test_a_paragraph_on_one_long_line_is_read_in_pieces_cut_after_sentences() -> None:
    sentences = [f"Sentence {i} says something about topic {i}." for i in range(80)]
    text = "# Title\n\n" + " ".join(sentences) + "\n"
    found = chunks.split("long.md", "Title", text)
    assert len(found) > 2
    assert all(c.start == c.end == 3 for c in found[1:])
    pieces = [c.text.removeprefix("Title\n") for c in found]
    assert all(len(p) <= chunks.TARGET_CHARS + len("# Title\n") for p in pieces)
    # Every sentence is read, whole, in exactly one passage.
    for sentence in sentences:
        assert sum(sentence in p for p in pieces) == 1


def test_a_heading_goes_with_the_text_after_it_even_when_that_is_long() -> None:
    text = "# Title\n\n" + "word " * 190 + "\n"
    found = chunks.split("a.md", "Title", text)
    assert len(found) == 1
    assert found[0].text.startswith("# Title\n")
    assert (found[0].start, found[0].end) == (1, 3)


def test_a_passage_with_no_words_of_its_own_is_not_embedded() -> None:
    rst = "Summary\n-------\n\nOptions\n*******\n\nSee the manual page for every flag.\n"
    found = chunks.split("guide.txt", "", rst)
    assert [(c.start, c.end) for c in found] == [(4, 7)]  # Summary had nothing under it
    markdown = "# Title\n\n## Empty\n\n## Filled\n\nA sentence under it.\n\n---\n"
    found = chunks.split("note.md", "Title", markdown)
    assert [(c.start, c.end) for c in found] == [(5, 9)]  # the rule goes with the text
    full = "\n".join(f"value_{i:02} = compute_the_value({i:02})" for i in range(30))  # 990
    code = f"{full}\n\n+ ------------ +\n|              |\n}}\n"
    assert [(c.start, c.end) for c in chunks.split("table.py", "", code)] == [(1, 30)]
    assert chunks.split("empty.md", "A title", "# A title\n\n## Notes\n") == []
