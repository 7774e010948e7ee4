"""The rescan's comparison (scanner.walk given the index's stamps, indexer._compare):
which files are read, which rows are removed, and which are left alone, in-process on
small trees. The daemon-level tests (test_change_detection.py, test_watch_*.py) cover
the same through real restarts and events; these pin the corners of the set logic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kbindex.daemon.indexing.ignore import Chain, IgnoreRules
from kbindex.daemon.indexing.indexer import _compare
from kbindex.daemon.indexing.scanner import Stamp, walk


def rules() -> IgnoreRules:
    return IgnoreRules(included_extensions=None, excluded_extensions=frozenset())


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    for rel in ("a.md", "b.md", "sub/c.md"):
        (root / rel).write_text(rel)
    return root


def test_a_walk_given_the_stamps_keeps_only_what_changed_and_leaves_the_rest(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path)
    gone = (str(root / "gone.md"), 1, 1, 1, 1, 1)
    known: set[Stamp] = {*walk(root, root, rules()).stamps, gone}
    (root / "b.md").write_text("b.md, longer now")
    (root / "new.md").write_text("new")

    result = walk(root, root, rules(), None, known)

    assert result.matched == 2 and result.listed == 4
    assert sorted(s[0] for s in result.stamps) == [str(root / "b.md"), str(root / "new.md")]
    # Left in ``known``: the row of the changed file and the row of the one gone.
    assert sorted(k[0] for k in known) == [str(root / "b.md"), gone[0]]
    changed, removed = _compare([result], known, full=False)
    assert sorted(s.relpath for s in changed) == ["b.md", "new.md"]
    assert removed == [gone[0]]


def test_a_full_walk_reads_everything_and_still_removes_what_is_gone(tmp_path: Path) -> None:
    root = tree(tmp_path)
    gone = (str(root / "gone.md"), 1, 1, 1, 1, 1)
    known: set[Stamp] = {*walk(root, root, rules()).stamps, gone}

    result = walk(root, root, rules())  # a full refresh walks without the stamps
    changed, removed = _compare([result], known, full=True)

    assert sorted(s.relpath for s in changed) == ["a.md", "b.md", "sub/c.md"]
    assert removed == [gone[0]]


def test_a_row_whose_size_the_cap_flipped_is_read_again(tmp_path: Path) -> None:
    """``Index.known`` gives size -1 when the size cap now decides a file the other way."""
    root = tree(tmp_path)
    known = walk(root, root, rules()).stamps
    a = next(s for s in known if s[0].endswith("a.md"))
    known = (known - {a}) | {(a[0], -1, *a[2:])}

    result = walk(root, root, rules(), None, known)
    changed, removed = _compare([result], known, full=False)

    assert [s.relpath for s in changed] == ["a.md"] and removed == []


def test_overlapping_scopes_remove_nothing_and_a_later_listing_wins(tmp_path: Path) -> None:
    root = tree(tmp_path)
    known = walk(root, root, rules()).stamps
    memo: dict[str, Chain | str] = {}
    whole = walk(root, root, rules(), memo, known)
    sub = walk(root, root / "sub", rules(), memo, known)

    changed, removed = _compare([whole, sub], known, full=False)

    # The second walk of sub/ finds its rows already taken: its file is read again,
    # which costs a read, never a wrong removal.
    assert [s.relpath for s in changed] == ["sub/c.md"] and removed == []


def test_files_under_a_directory_that_cannot_be_listed_are_kept(tmp_path: Path) -> None:
    root = tree(tmp_path)
    known = walk(root, root, rules()).stamps
    result = walk(root, root, rules(), None, known)
    # As if sub/ had failed to list (a permission error): its row is left unmatched.
    result.problems.append((str(root / "sub"), "Permission denied"))
    known.add((str(root / "sub" / "c.md"), 0, 0, 0, 0, 0))

    changed, removed = _compare([result], known, full=False)

    assert len(changed) == 0 and removed == []


def test_a_file_scope_matches_its_own_row(tmp_path: Path) -> None:
    root = tree(tmp_path)
    known = walk(root, root, rules()).stamps
    os.utime(root / "a.md", ns=(1, 1))

    result = walk(root, root / "a.md", rules(), None, known)

    assert [s[0] for s in result.stamps] == [str(root / "a.md")] and result.matched == 0
    unchanged = walk(root, root / "b.md", rules(), None, known)
    assert unchanged.stamps == set() and unchanged.matched == 1


def test_files_of_two_roots_come_in_path_order_each_with_its_root(tmp_path: Path) -> None:
    first, second = tree(tmp_path / "one"), tree(tmp_path / "two")
    (second / "sub" / "d.md").write_text("d")

    changed, _ = _compare([walk(second, second, rules()), walk(first, first, rules())], set(), True)

    paths = [s.path for s in changed]
    assert paths == sorted(paths) and len(paths) == 7
    assert {(s.relpath, s.root) for s in changed} >= {
        ("sub/d.md", str(second)),
        ("a.md", str(first)),
        ("a.md", str(second)),
    }
    assert (changed.count_in(str(first)), changed.count_in(str(second))) == (3, 4)
    seen = next(s for s in changed if s.path == str(first / "a.md"))
    st = (first / "a.md").stat()
    assert seen.signature == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def test_a_time_past_64_bits_is_kept_as_listed(tmp_path: Path) -> None:
    """A file stamped centuries ahead (ext4 takes times to 2446) has an mtime past a
    signed 64-bit number: the compact list keeps it as it is, and the others as well."""
    root = tree(tmp_path)
    far = 10_400_000_000_000_000_000  # 2299
    os.utime(root / "b.md", ns=(far, far))
    if (root / "b.md").stat().st_mtime_ns != far:
        pytest.skip("this file system cannot store a time past 2262")

    changed, _ = _compare([walk(root, root, rules())], set(), True)

    by_name = {s.relpath: s for s in changed}
    assert by_name["b.md"].mtime_ns == far
    assert by_name["a.md"].mtime_ns == (root / "a.md").stat().st_mtime_ns
    assert [s.relpath for s in changed] == ["a.md", "b.md", "sub/c.md"]
