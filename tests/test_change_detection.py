"""Every change is seen: edits that keep size and mtime, and settings that decide whether
a file is indexed.

Which ``stat`` field catches which edit made while the daemon was down (each keeps the
size and the mtime; the index compares what git's index compares):

| edit                                  | ctime | inode | how                        |
| ------------------------------------- | ----- | ----- | -------------------------- |
| ``cp -p new file``  (in place)        | yes   | no    | content written, times set |
| ``touch -r ref file`` after an edit   | yes   | no    | mtime set back             |
| ``rsync -t new file``                 | yes   | yes   | a new file renamed over it |
| ``tar x`` of an archive               | yes   | maybe | unlinked and created again |
| a backup restored by ``os.replace``   | yes   | yes   | another file renamed in    |

GNU tar unlinks the old file first, and the new one often gets the freed inode number
back: only the change time is sure to differ. The device catches a file replaced by one
from another file system (it also has a new inode there); a test cannot mount one, so no
row stands for it alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, wait_for, write

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

BEFORE = "# Orbit\n\nthe probe carries a magnetometer aboard\n"
AFTER = "# Orbit\n\nthe probe carries a spectrometer aboard\n"
assert len(BEFORE) == len(AFTER)


def _same_times(src: Path, like: os.stat_result) -> None:
    os.utime(src, ns=(like.st_atime_ns, like.st_mtime_ns))


def cp_p(target: Path, scratch: Path) -> None:
    new = write(scratch / "new.md", AFTER)
    _same_times(new, target.stat())
    subprocess.run(["cp", "-p", str(new), str(target)], check=True)


def touch_r(target: Path, scratch: Path) -> None:
    ref = write(scratch / "ref", "")
    _same_times(ref, target.stat())
    target.write_text(AFTER)
    subprocess.run(["touch", "-r", str(ref), str(target)], check=True)


def rsync_t(target: Path, scratch: Path) -> None:
    # rsync copies only when size or mtime differ: an edit first (a draft), then a
    # copy whose mtime is the indexed one's lands over it.
    new = write(scratch / target.name, AFTER)
    _same_times(new, target.stat())
    target.write_text("draft " * 3)
    subprocess.run(["rsync", "-t", str(new), str(target)], check=True)


def tar_x(target: Path, scratch: Path) -> None:
    new = write(scratch / "tree" / target.name, AFTER)
    _same_times(new, target.stat())
    archive = scratch / "a.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(new, arcname=target.name)
    subprocess.run(["tar", "-xf", str(archive), "-C", str(target.parent)], check=True)


def restore_backup(target: Path, scratch: Path) -> None:
    backup = write(scratch / "backup.md", AFTER)
    _same_times(backup, target.stat())
    os.replace(backup, target)


EDITS: dict[str, tuple[Callable[[Path, Path], None], bool | None]] = {
    "cp -p": (cp_p, False),
    "touch -r": (touch_r, False),
    "rsync -t": (rsync_t, True),
    "tar x": (tar_x, None),
    "backup restored": (restore_backup, True),
}
"""name: (the edit, whether it gives the file a new inode; None: it may or may not)."""


@pytest.mark.parametrize("name", list(EDITS))
async def test_an_edit_that_keeps_size_and_mtime_is_indexed_at_the_next_start(
    make_daemon: MakeDaemon, tmp_path: Path, name: str
) -> None:
    edit, new_inode = EDITS[name]
    if name == "rsync -t" and shutil.which("rsync") is None:
        pytest.skip("rsync is not installed (.ci/run installs it)")
    root = tmp_path / "root"
    target = write(root / "orbit.md", BEFORE)
    # A whole second: tar and rsync keep mtimes to the microsecond at best.
    os.utime(target, (1_700_000_000, 1_700_000_000))
    d = make_daemon(root)
    await d.start()
    assert await d.search_paths("magnetometer") == ["orbit.md"]
    d.stop()

    before = target.stat()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    edit(target, scratch)
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    if new_inode is not None:
        assert (after.st_ino != before.st_ino) == new_inode
    assert target.read_text() == AFTER

    await d.start()
    assert await d.search_paths("spectrometer") == ["orbit.md"]
    assert await d.search_paths("magnetometer") == []


async def test_an_edit_through_a_hard_link_outside_the_roots_is_caught_by_the_next_scan(
    daemon: Daemon, tmp_path: Path
) -> None:
    """No event reaches the watcher for a write through another name; the periodic scan
    (here asked for at once, as a plain reindex) compares the change time."""
    target = write(daemon.root / "orbit.md", BEFORE)
    await daemon.refresh()
    assert await daemon.search_paths("magnetometer") == ["orbit.md"]
    outside = tmp_path / "elsewhere" / "linked.md"
    outside.parent.mkdir()
    os.link(target, outside)
    before = target.stat()
    outside.write_text(AFTER)
    _same_times(outside, before)

    await daemon.refresh()
    assert await daemon.search_paths("spectrometer") == ["orbit.md"]


def _cap(config: Path, root: Path, megabytes: float) -> None:
    config.write_text(f'roots = ["{root}"]\nmax_file_size_mb = {megabytes}\n')


async def test_the_size_cap_applies_to_unchanged_files_on_sighup_and_restart_both_ways(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    write(root / "big.md", "# Big\n\nquasar\n" + "filler line of text\n" * 60_000)  # 1.2 MB
    write(root / "small.md", "quasar small\n")
    config = tmp_path / "kb.toml"
    _cap(config, root, 1)
    d = make_daemon(root)
    d.roots = []  # from the config file, which SIGHUP re-reads
    d.extra_args = ["--config", str(config)]
    await d.start()
    assert await d.search_paths("quasar") == ["small.md"]

    async def found(expected: list[str]) -> bool:
        return sorted(await d.search_paths("quasar")) == expected

    assert d.proc is not None
    _cap(config, root, 2)  # raised: the skipped file joins without reindex --full
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: found(["big.md", "small.md"]), timeout=20)

    _cap(config, root, 1)  # lowered: it leaves
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: found(["small.md"]), timeout=20)

    d.stop()  # and the same across a restart, both ways
    _cap(config, root, 2)
    await d.start()
    assert await found(["big.md", "small.md"])
    d.stop()
    _cap(config, root, 1)
    await d.start()
    assert await found(["small.md"])


SETTINGS: dict[str, tuple[str, str]] = {
    "included_extensions": ('included_extensions = ["md"]', 'included_extensions = ["md", "rst"]'),
    "excluded_extensions": ('excluded_extensions = ["rst"]', ""),
    "exclude_globs": ('exclude_globs = ["notes.rst"]', ""),
    "per-root exclude": ('exclude = ["*.rst"]', ""),
}
"""setting: (the line that leaves notes.rst out, the line that lets it in)."""


@pytest.mark.parametrize("name", list(SETTINGS))
async def test_settings_that_decide_indexing_apply_to_unchanged_files_both_ways(
    make_daemon: MakeDaemon, tmp_path: Path, name: str
) -> None:
    root = tmp_path / "root"
    write(root / "kept.md", "quasar kept\n")
    write(root / "notes.rst", "quasar notes\n")
    config = tmp_path / "kb.toml"
    out, into = SETTINGS[name]

    def configure(line: str) -> None:
        table = f'[root."{root}"]\n' if name.startswith("per-root") else ""
        config.write_text(f'roots = ["{root}"]\n{table}{line}\n')

    configure(out)
    d = make_daemon(root)
    d.roots = []
    d.extra_args = ["--config", str(config)]
    await d.start()

    async def found(expected: list[str]) -> bool:
        return sorted(await d.search_paths("quasar")) == expected

    assert await found(["kept.md"])
    assert d.proc is not None
    configure(into)
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: found(["kept.md", "notes.rst"]), timeout=20)
    configure(out)
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: found(["kept.md"]), timeout=20)

    d.stop()
    configure(into)
    await d.start()
    assert await found(["kept.md", "notes.rst"])
    d.stop()
    configure(out)
    await d.start()
    assert await found(["kept.md"])


async def test_an_ignore_file_edited_while_the_daemon_was_down_applies_both_ways(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    write(root / "kept.md", "quasar kept\n")
    write(root / "draft.md", "quasar draft\n")
    d = make_daemon(root)
    await d.start()
    assert sorted(await d.search_paths("quasar")) == ["draft.md", "kept.md"]
    d.stop()
    write(root / ".kbignore", "draft.md\n")
    await d.start()
    assert await d.search_paths("quasar") == ["kept.md"]
    d.stop()
    (root / ".kbignore").unlink()
    await d.start()
    assert sorted(await d.search_paths("quasar")) == ["draft.md", "kept.md"]
