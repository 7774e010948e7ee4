"""Daemon lifecycle: settings validation, one daemon per socket, stale sockets,
corrupt indexes, and kbctl as a user runs it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, wait_exit, write
from kbindex.daemon import settings as settings_mod
from kbindex.daemon.backends import BACKENDS
from kbindex.daemon.extracting import extractor, formats
from kbindex.daemon.settings import SettingsError

pytestmark = pytest.mark.anyio


def _load(argv: list[str], env: dict[str, str] | None = None) -> settings_mod.Settings:
    parser = argparse.ArgumentParser()
    settings_mod.add_arguments(parser, tuple(BACKENDS))
    return settings_mod.load(parser.parse_args(argv), env or {"XDG_CONFIG_HOME": "/nonexistent"})


def test_the_backends_the_settings_take_are_those_of_the_backends_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A third backend is a folder and a line in ``backends.BACKENDS``: the settings take
    its name from there (a flag, the environment, the config file), and refuse a name
    that is not there, listing those that are."""
    monkeypatch.setitem(BACKENDS, "third", "kbindex.daemon.backends.third.index:ThirdIndex")
    assert _load(["--backend", "third"]).backend == "third"
    env = {"KBINDEX_BACKEND": "fourth", "XDG_CONFIG_HOME": "/nonexistent"}
    with pytest.raises(SettingsError, match="backend must be one of sqlite, postgres, third,"):
        _load([], env)
    assert _load([]).backend == "sqlite"


def test_settings_defaults_and_precedence(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'roots = ["{root}"]\nscan_interval_seconds = 60\nmax_file_size_mb = 2\n')
    s = _load(["--config", str(cfg)], {"KBINDEX_SCAN_INTERVAL": "30"})
    assert s.roots == (root.resolve(),)
    assert s.scan_interval_seconds == 30  # environment beats the file
    assert s.max_file_size_mb == 2
    # and the documents' extensions where kbindex[documents] is installed (test_documents)
    documents = {e for e, k in formats.KINDS.items() if k in extractor.installed()}
    assert s.included_extensions == frozenset({".txt", ".md", ".rst", *documents})
    s = _load(["--config", str(cfg), "--scan-interval", "10", "--include-ext", "*"])
    assert s.scan_interval_seconds == 10  # the flag beats both
    assert s.included_extensions is None


def test_runtime_dir_default_socket(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    s = _load([str(root)], {"XDG_RUNTIME_DIR": "/run/user/1234"})
    assert s.socket_path == Path("/run/user/1234/kbindex/kbindex.sock")
    s = _load([str(root)], {})
    assert s.socket_path == Path(f"/tmp/kbindex-{os.getuid()}/kbindex.sock")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('roots = ["/definitely/not/here"]', "does not exist"),
        ('roots = "/tmp"', "must be a list"),
        ('roots = ["{root}"]\nscan_interval_seconds = "soon"', "scan_interval_seconds"),
        ('roots = ["{root}"]\nscan_interval_seconds = 0', "at least"),
        ('roots = ["{root}"]\nmax_file_size_mb = -1', "max_file_size_mb"),
        ('roots = ["{root}"]\nframe_timeout_seconds = 0', "frame_timeout_seconds"),
        ('roots = ["{root}"]\nincluded_extensions = 5', "included_extensions"),
        ('roots = ["{root}"]\nroots_typo = 1', "unknown setting"),
        ('roots = ["{root}", "{root}/sub"]', "inside root"),
        ("roots = [", "not valid TOML"),
    ],
)
def test_bad_settings_fail_fast_with_a_clear_message(
    tmp_path: Path, content: str, message: str
) -> None:
    root = tmp_path / "r"
    (root / "sub").mkdir(parents=True)
    cfg = tmp_path / "c.toml"
    cfg.write_text(content.replace("{root}", str(root)))
    with pytest.raises(SettingsError, match=message):
        _load(["--config", str(cfg)])


def test_kbindexd_reports_bad_settings_and_exits_2(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.roots = [d.root / "missing"]
    proc = d.spawn()
    assert wait_exit(proc) == 2
    assert "does not exist" in d.log()


@pytest.mark.slow
async def test_second_daemon_on_same_socket_exits_with_clear_message(daemon: Daemon) -> None:
    proc = daemon.spawn()
    assert wait_exit(proc) == 1
    assert "already using" in daemon.log()
    async with daemon.client() as c:  # the first one is unharmed
        await c.ping()


@pytest.mark.slow
async def test_stale_socket_from_dead_daemon_is_replaced(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "a.md", "alive again\n")
    await d.start()
    assert d.proc is not None
    d.proc.send_signal(signal.SIGKILL)  # dies without cleaning up
    d.proc.wait()
    d.proc = None
    assert d.socket.exists()
    await d.start()
    assert await d.search_paths("alive") == ["a.md"]


async def test_socket_is_private(daemon: Daemon) -> None:
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700


async def test_sigterm_removes_socket_and_exits_cleanly(daemon: Daemon) -> None:
    assert daemon.stop() == 0
    assert not daemon.socket.exists()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
async def test_unusable_index_is_kept_aside_and_rebuilt(
    make_daemon: MakeDaemon, damage: str
) -> None:
    d = make_daemon()
    write(d.root / "a.md", "survivor text\n")
    await d.start()
    d.stop()
    db = d.db_path
    if damage == "garbage":
        db.write_bytes(b"this is not a database" * 100)
    else:
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 3])
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    await d.start()
    async with d.client() as c:
        status = await c.status()
    assert status.index_recovered, "status must say the index was rebuilt"
    kept = list(d.state_dir.glob("index.sqlite3.corrupt-*"))
    assert kept, "the damaged file is kept for inspection"
    assert await d.search_paths("survivor") == ["a.md"]


async def test_kbctl_commands(daemon: Daemon) -> None:
    write(daemon.root / "guide.md", "# Guide\n\nfirst line\nthe needle line\n")
    r = daemon.kbctl("reindex", "--wait")
    assert r.returncode == 0, r.stderr
    assert "1 files checked" in r.stdout

    r = daemon.kbctl("search", "needle")
    assert r.returncode == 0 and "guide.md:4" in r.stdout and "1 match" in r.stdout

    r = daemon.kbctl("search", "needle", "--json")
    payload = json.loads(r.stdout)
    assert payload["hits"][0]["line"] == 4 and payload["total_hits"] == 1

    r = daemon.kbctl("status")
    assert r.returncode == 0 and "1 files" in r.stdout and str(daemon.root) in r.stdout
    status = json.loads(daemon.kbctl("status", "--json").stdout)
    assert status["indexed_files"] == 1

    r = daemon.kbctl("read", "guide.md", "--start", "4")
    assert r.stdout.strip() == "4| the needle line"

    r = daemon.kbctl("files", "*.md")
    assert "guide.md" in r.stdout

    r = daemon.kbctl("search", "--mode", "raw", "needle AND (")
    assert r.returncode == 1 and "bad_query" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
async def test_kbctl_piped_into_a_reader_that_stops_ends_quietly(daemon: Daemon) -> None:
    write(daemon.root / "long.md", "".join(f"line {i} of a long note\n" for i in range(40_000)))
    await daemon.refresh()
    import subprocess
    import sys

    # ``kbctl read long.md | head -1``: the reader takes one line and closes the pipe.
    command = [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket)]
    with subprocess.Popen(
        [*command, "read", "long.md"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == b"1| line 0 of a long note"
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=30) == 141
    assert stderr == ""


def test_kbctl_without_daemon_says_how_to_start_it(sockdir: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", f"{sockdir}/none.sock", "status"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "not running" in r.stderr and "kbindexd" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid")
async def test_connection_from_other_uid_is_refused(daemon: Daemon) -> None:
    """A child process drops to uid 65534 and connects. The directory and socket modes
    are opened up for this test only, so that the peer-credential check is the one
    thing standing in the way."""
    import subprocess
    import sys

    os.chmod(daemon.socket.parent, 0o755)
    os.chmod(daemon.socket, 0o777)
    # The client library itself must surface the refusal (sent before any request,
    # with id 0) as the daemon's error, not as a lost connection.
    child = (
        "import asyncio, os, anyio, anyio._backends._asyncio  # before setuid: /root is private\n"
        "from pathlib import Path\n"
        "from kbindex.proto.client import Client, DaemonError\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "async def main():\n"
        "    try:\n"
        "        async with Client.connect(Path(%r)) as c:\n"
        "            await c.ping()\n"
        "    except DaemonError as exc:\n"
        "        print(exc.code)\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "anyio.run(main)\n"
    ).replace("%r", repr(str(daemon.socket)))
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "permission_denied", r.stderr
    async with daemon.client() as c:  # our own connections still work
        await c.ping()
