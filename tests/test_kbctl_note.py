"""kbctl note end to end: kbctl run as a process, as a shell or a script runs it, against a
real kbindexd with a writable root and a read-only one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, with_writable_root, write

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.fixture
async def notes(make_daemon: MakeDaemon, tmp_path: Path) -> AsyncIterator[Daemon]:
    d = with_writable_root(make_daemon, tmp_path)
    await d.start()
    yield d
    d.stop()


def kbctl(
    daemon: Daemon, *args: str, stdin: str | bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args],
        input=data,
        capture_output=True,
        timeout=30,
        cwd=cwd or daemon.base,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_write_edit_append_mv_rm_from_a_shell(notes: Daemon) -> None:
    root = notes.root
    # From outside the roots a relative path is relative to the writable root.
    made = kbctl(notes, "note", "write", "ideas/zebra.md", stdin="zebrafish regrow fins\n")
    assert made.returncode == 0, made.stderr
    digest, rest = made.stdout.split("  ", 1)
    assert len(digest) == 16
    assert rest == f"1 lines  {root}/ideas/zebra.md  (created)\n"
    assert (root / "ideas" / "zebra.md").read_text() == "zebrafish regrow fins\n"
    # Searchable when kbctl returns.
    found = kbctl(notes, "search", "zebrafish")
    assert found.stdout.startswith(f"{root}/ideas/zebra.md:1")

    # edit with the hash just printed; the old hash is then refused, exit 1, the code shown
    edited = kbctl(
        notes, "note", "edit", "ideas/zebra.md", "--old", "fins", "--new", "hearts",
        "--if-match", digest,
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    assert (root / "ideas" / "zebra.md").read_text() == "zebrafish regrow hearts\n"
    stale = kbctl(
        notes, "note", "edit", "ideas/zebra.md", "--old", "hearts", "--new", "x",
        "--if-match", digest,
    )  # fmt: skip
    assert stale.returncode == 1
    assert stale.stdout == ""
    assert stale.stderr.startswith("kbctl: ideas/zebra.md changed since ")
    assert stale.stderr.endswith(" [ECONFLICT]\n")

    # --old-file / --new-file, one of them from stdin: multi-line text as it is
    write(notes.base / "old.txt", "zebrafish regrow hearts\n")
    from_files = kbctl(
        notes, "note", "edit", "ideas/zebra.md", "--old-file", str(notes.base / "old.txt"),
        "--new-file", "-", stdin="line one\nline two\n",
    )  # fmt: skip
    assert from_files.returncode == 0, from_files.stderr
    assert (root / "ideas" / "zebra.md").read_text() == "line one\nline two\n"

    # append from stdin, creating the note; --json prints the reply
    first = kbctl(notes, "note", "append", "log.md", "--json", stdin="first entry")
    assert first.returncode == 0, first.stderr
    reply = json.loads(first.stdout)
    assert reply == {
        "path": str(root / "log.md"),
        "hash": reply["hash"],
        "lines": 1,
        "size": 11,
        "created": True,
        "index_error": "",
    }
    kbctl(notes, "note", "append", "log.md", stdin="second entry\n")
    assert (root / "log.md").read_text() == "first entry\nsecond entry\n"

    # mv refuses to overwrite unless asked; rm deletes; the index follows each at once
    taken = kbctl(notes, "note", "mv", "log.md", "ideas/zebra.md")
    assert taken.returncode == 1
    assert taken.stderr.endswith(" [EEXIST]\n")
    moved = kbctl(notes, "note", "mv", "log.md", "archive/log.md")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.endswith(f"2 lines  {root}/archive/log.md  (created)\n")
    assert kbctl(notes, "search", "second", "entry").stdout.startswith(f"{root}/archive/log.md")
    gone = kbctl(notes, "note", "rm", "archive/log.md")
    assert (gone.returncode, gone.stdout) == (0, f"deleted {root}/archive/log.md\n")
    assert kbctl(notes, "search", "second", "entry").stdout == "no matches\n"


async def test_a_relative_path_inside_a_root_is_taken_from_there(notes: Daemon) -> None:
    here = notes.root / "projects" / "kb"
    here.mkdir(parents=True)
    made = kbctl(notes, "note", "write", "plan.md", "--title", "Plan", stdin="steps\n", cwd=here)
    assert made.returncode == 0, made.stderr
    assert (here / "plan.md").read_text() == "# Plan\n\nsteps\n"
    # ... and a note that exists here is found from here, wherever "here" is.
    appended = kbctl(notes, "note", "append", "projects/kb/plan.md", stdin="more", cwd=notes.root)
    assert appended.returncode == 0, appended.stderr
    assert (here / "plan.md").read_text() == "# Plan\n\nsteps\nmore"


async def test_refusals_exit_1_with_the_code_and_touch_nothing(notes: Daemon) -> None:
    readonly = notes.roots[1]
    cases = [
        (["note", "write", str(readonly / "manual.md")], "x", "EROFS"),
        (["note", "write", "/etc/kbindex-test.md"], "x", "EACCES"),
        (["note", "rm", "absent.md"], "", "ENOENT"),
        (["note", "write", "nul.md"], "a\x00b", "EILSEQ"),
        (["note", "write", "big.md"], "y" * 2_000_000, "EFBIG"),
    ]
    for args, stdin, code in cases:
        done = kbctl(notes, *args, stdin=stdin)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stdout == ""
        assert done.stderr.startswith("kbctl: ") and done.stderr.endswith(f" [{code}]\n"), (
            args,
            done.stderr,
        )
        assert done.stderr.count("\n") == 1
    latin1 = kbctl(notes, "note", "write", "latin.md", stdin=b"caf\xe9\n")
    assert (latin1.returncode, latin1.stderr) == (
        1,
        "kbctl: standard input is not UTF-8 text: notes are text [EILSEQ]\n",
    )
    usage = kbctl(notes, "note", "edit", "x.md", "--old", "a")
    assert usage.returncode == 2
    assert (readonly / "manual.md").read_text() == "# Manual\nread only text\n"
    assert list(notes.root.iterdir()) == []


async def test_status_and_roots_show_which_roots_are_writable(notes: Daemon) -> None:
    writable, readonly = notes.roots
    status = kbctl(notes, "status").stdout
    # the state (live, or degraded where inotify is short) is not what this is about
    assert re.search(rf"^  {writable}  \w+  0 files  writable$", status, re.M), status
    assert re.search(rf"^  {readonly}  \w+  1 files$", status, re.M), status
    roots = json.loads(kbctl(notes, "status", "--json").stdout)["roots"]
    assert [(r["path"], r["writable"]) for r in roots] == [
        (str(writable), True),
        (str(readonly), False),
    ]
    listed = kbctl(notes, "roots").stdout
    assert re.search(rf"^{writable}  \w+  0 files  writable$", listed, re.M), listed
    assert re.search(rf"^{readonly}  \w+  1 files$", listed, re.M), listed


async def test_if_match_empty_on_an_existing_note_says_it_exists(notes: Daemon) -> None:
    made = kbctl(notes, "note", "write", "taken.md", stdin="first\n")
    assert made.returncode == 0, made.stderr
    digest = made.stdout.split("  ", 1)[0]
    again = kbctl(notes, "note", "write", "taken.md", "--if-match", "", stdin="second\n")
    assert again.returncode == 1
    assert again.stderr == (
        f'kbctl: taken.md already exists (hash {digest}); if_match "" asks for a new note:'
        " pass that hash to replace it [EEXIST]\n"
    )
    assert (notes.root / "taken.md").read_text() == "first\n"
