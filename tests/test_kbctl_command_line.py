"""kbctl's command line takes the query language it advertises (``-word`` exclusions
among the options), ``grep -e`` for a pattern starting with -, ``--version``, and says
what happens to a reindex when its wait is interrupted.

A real kbindexd on a real socket; kbctl runs as a process, as a shell runs it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from conftest import Daemon, MakeDaemon, wait_for, write
from grep_helpers import RG, needs_rg
from kbindex.ctl import main as kbctl_main

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("words", "argv"),
    [
        (["python", "-django"], ["--", "python", "-django"]),
        (["python", "-django", "--limit", "1"], ["--limit=1", "--", "python", "-django"]),
        (["--json", "-x", "y", "--mode", "words"], ["--json", "--mode=words", "--", "-x", "y"]),
        (["--path", "-odd/", "a"], ["--path=-odd/", "--", "a"]),
        (["a", "--", "--limit", "1", "-h"], ["--", "a", "--limit", "1", "-h"]),
        (["-h"], ["-h", "--"]),
        (["--lmit", "3", "a"], ["--lmit", "--", "3", "a"]),  # argparse refuses --lmit
    ],
)
def test_search_words_starting_with_a_dash_are_query_words(
    words: list[str], argv: list[str]
) -> None:
    assert kbctl_main.search_argv(words) == argv


@pytest.mark.slow
async def test_kbctl_search_takes_exclusions_and_options_before_or_after(
    daemon: Daemon,
) -> None:
    write(daemon.root / "web.md", "python django views\n")
    write(daemon.root / "micro.md", "python flask routes\n")
    write(daemon.root / "flags.md", "the --verbose flag and its limit 1\n")
    await daemon.refresh()
    r = daemon.kbctl("search", "python", "-django")
    assert r.returncode == 0, r.stderr
    assert "micro.md" in r.stdout and "web.md" not in r.stdout
    for args in (
        ["search", "python", "-django", "--limit", "1", "--json"],
        ["search", "--json", "--limit", "1", "python", "-django"],
        ["search", "--json", "python", "--limit=1", "-django"],
    ):
        r = daemon.kbctl(*args)
        assert r.returncode == 0, (args, r.stderr)
        hits = json.loads(r.stdout)["hits"]
        assert [h["relpath"] for h in hits] == ["micro.md"], args
    # After --, every word is a query word: no usage error, a search for them.
    r = daemon.kbctl("search", "--json", "--", "--verbose", "--limit", "1")
    assert r.returncode == 0, r.stderr
    assert [h["relpath"] for h in json.loads(r.stdout)["hits"]] == ["flags.md"]
    # A word starting with -- that is no option is a typo, not a query word.
    r = daemon.kbctl("search", "python", "--lmit", "1")
    assert r.returncode == 2 and "--lmit" in r.stderr


@pytest.mark.slow
@needs_rg
async def test_kbctl_grep_e_takes_a_pattern_starting_with_a_dash(daemon: Daemon) -> None:
    write(daemon.root / "opts.txt", "use -foo here\nnot this one\n--foo twice\n")
    write(daemon.root / "opts.md", "a -foo line\n")
    await daemon.refresh()
    r = daemon.kbctl("grep", "-e", "-foo", cwd=daemon.root)
    assert r.returncode == 0, r.stderr
    assert RG is not None
    rg = subprocess.run(
        [RG, "-uu", "--no-heading", "--line-number", "--sort", "path", "-e", "-foo"],
        capture_output=True,
        text=True,
        cwd=daemon.root,
    )
    assert r.stdout == rg.stdout
    assert r.stdout.splitlines() == [
        "opts.md:1:a -foo line",
        "opts.txt:1:use -foo here",
        "opts.txt:3:--foo twice",
    ]
    assert daemon.kbctl("grep", "--regexp", "-foo", "-F", cwd=daemon.root).stdout == r.stdout
    twice = daemon.kbctl("grep", "-e", "-foo", "-e", "bar")
    assert twice.returncode == 2 and "-e is taken once" in twice.stderr
    both = daemon.kbctl("grep", "-e", "-foo", "line")
    assert both.returncode == 2 and "PATTERN given twice" in both.stderr
    none = daemon.kbctl("grep", "--json")
    assert none.returncode == 2 and "a PATTERN is needed" in none.stderr


@pytest.mark.slow
async def test_kbctl_version_says_its_own_and_the_running_daemons(
    make_daemon: MakeDaemon,
) -> None:
    from importlib.metadata import version

    d = make_daemon()
    await d.start()
    r = d.kbctl("--version")
    assert r.returncode == 0, r.stderr
    mine, daemons = r.stdout.splitlines()
    assert mine.startswith(f"kbctl {version('kbindex')} (protocol ")
    assert daemons == f"kbindexd {version('kbindex')} on {d.socket}"
    d.stop()
    r = d.kbctl("--version")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0] == mine
    assert r.stdout.splitlines()[1].startswith("kbindexd is not running")


@pytest.mark.slow
async def test_ctrl_c_during_reindex_wait_says_the_reindex_goes_on_and_it_does(
    make_daemon: MakeDaemon,
) -> None:
    """kbctl leaves the wait with 130 and says the daemon goes on; the daemon finishes the
    reindex all the same (files it alone brings in: no watcher, no periodic scan)."""
    d = make_daemon()
    d.extra_args = ["--watch", "off"]
    await d.start()
    count = 3000
    for i in range(count):
        write(d.root / f"n{i:04}.md", f"note {i} ctrlcword\n")
    command = [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(d.socket)]
    with subprocess.Popen(
        [*command, "reindex", "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        # Non-interactive, kbctl prints a line at each phase: reading files has begun.
        for line in proc.stderr:
            if line.startswith("indexing:"):
                break
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        stderr = proc.stderr.read()
        stdout = proc.stdout.read()
    assert code == 130, (stdout, stderr)
    assert "the reindex goes on in kbindexd" in stderr and "Traceback" not in stderr
    assert "done:" not in stdout

    async def all_indexed() -> bool:
        async with d.client() as c:
            return (await c.status()).indexed_files == count

    await wait_for(all_indexed, timeout=60)
