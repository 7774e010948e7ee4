"""Answers say what happened: errors name the path and the reason, both front ends
word the same facts the same way, and kbctl ends quietly when its reader goes away.

A real kbindexd on a real socket; kbctl and kbindex-mcp run as processes.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, wait_for, write
from kbindex.ctl import render
from kbindex.daemon.engine import sqlite
from kbindex.mcpfront import results
from kbindex.proto.client import DaemonError
from mcp_helpers import mcp_stdio, structured, text

pytestmark = pytest.mark.anyio

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def kbctl(daemon: Daemon, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
    )


# ------------------------------------------------------------------ reindex


@pytest.mark.slow
@pytest.mark.backends
async def test_reindex_of_a_path_that_is_not_there_is_an_error(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon()
    daemon.extra_args = ["--watch", "off"]  # the deletion below waits for a reindex
    write(daemon.root / "gone.md", "soon deleted\n")
    await daemon.start()
    for args in (["reindex", "nothere.md"], ["reindex", "--wait", "nothere.md"]):
        r = kbctl(daemon, *args)
        assert r.returncode == 1, r.stdout
        assert "nothere.md does not exist" in r.stderr and "Traceback" not in r.stderr
    r = kbctl(daemon, "reindex", "/etc")
    assert r.returncode == 1 and "/etc" in r.stderr and "outside" in r.stderr
    # A file gone from disk but still indexed is refreshable: that is how it leaves.
    (daemon.root / "gone.md").unlink()
    r = kbctl(daemon, "reindex", "--wait", "gone.md")
    assert r.returncode == 0 and "1 removed" in r.stdout, r.stderr


@pytest.mark.slow
async def test_refresh_index_of_a_path_that_is_not_there_is_an_error(daemon: Daemon) -> None:
    async with mcp_stdio(daemon.socket) as client:
        missing = await client.call_tool("refresh_index", {"filepath": "nothere.md"})
        assert missing.is_error
        assert "nothere.md does not exist" in text(missing)
        outside = await client.call_tool("refresh_index", {"filepath": "/etc"})
        assert outside.is_error and "/etc" in text(outside)


# ------------------------------------------------------------------ read_file


@pytest.mark.backends
async def test_reading_a_skipped_file_says_why_as_why_does(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.extra_args = ["--max-file-size-mb", "0.001", "--exclude-glob", "private/"]
    write(d.root / "big.md", "x" * 5000)
    write(d.root / "blob.md", b"\x00\x01\x02binary\x00" * 10)
    write(d.root / "private" / "secret.md", "not for the index\n")
    (d.root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(d.root / ".gitignore", "scratch.md\n")
    write(d.root / "scratch.md", "ignored by git\n")
    await d.start()
    async with d.client() as c:
        for name in ("big.md", "blob.md", "private/secret.md", "scratch.md"):
            why = await c.why(name)
            assert not why.indexed
            with pytest.raises(DaemonError) as caught:
                await c.read_file(name)
            assert caught.value.code == "not_found"
            assert why.reason in caught.value.message, (name, why.reason)
        assert "too_large" in (await c.why("big.md")).reason
        assert "ignored" in (await c.why("scratch.md")).reason


@pytest.mark.slow
async def test_kbctl_and_mcp_read_of_a_skipped_file_say_why(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.extra_args = ["--max-file-size-mb", "0.001"]
    write(d.root / "big.md", "x" * 5000)
    await d.start()
    r = kbctl(d, "read", "big.md")
    assert r.returncode == 1 and "big.md" in r.stderr and "too_large" in r.stderr, r.stderr
    async with mcp_stdio(d.socket) as client:
        result = await client.call_tool("read_file", {"path": "big.md"})
        assert result.is_error and "too_large" in text(result), text(result)


@pytest.mark.slow
async def test_reading_past_the_end_of_a_file_is_an_error_naming_its_length(
    daemon: Daemon,
) -> None:
    write(daemon.root / "short.md", "".join(f"line {i}\n" for i in range(1, 439)))
    write(daemon.root / "empty.md", "")
    await daemon.refresh()
    r = kbctl(daemon, "read", "short.md", "--start", "500")
    assert r.returncode == 1 and r.stdout == ""
    assert "has 438 line(s): start_line 500 is past its end" in r.stderr, r.stderr
    last = kbctl(daemon, "read", "short.md", "--start", "438")
    assert last.returncode == 0 and last.stdout == "438| line 438\n"
    async with daemon.client() as c:
        with pytest.raises(DaemonError, match="start_line 439 is past its end"):
            await c.read_file("short.md", 439)
        assert (await c.read_file("empty.md", 1)).total_lines == 0  # nothing, and no error


# ------------------------------------------------------------------ titles


@pytest.mark.slow
async def test_a_python_file_is_titled_by_its_docstring_not_a_comment(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    d.extra_args = ["--include-ext", ".py"]
    write(d.root / "tool.py", '# flake8: noqa\n"""Frobnicate widgets."""\nimport os\n')
    write(d.root / "plain.py", "# noqa: E501 (a licence header would do too)\nx = 1\n")
    await d.start()
    async with d.client() as c:
        hits = (await c.search("noqa")).hits
    assert {h.relpath: h.title for h in hits} == {"tool.py": "Frobnicate widgets.", "plain.py": ""}


# ------------------------------------------------------------------ relative paths


@pytest.mark.slow
async def test_relative_paths_mean_the_same_in_every_kbctl_command(
    daemon: Daemon, tmp_path: Path
) -> None:
    """From inside root/sub, ``a.md`` is root/sub/a.md for read, why and reindex alike;
    from elsewhere, ``sub/a.md`` is looked up under the roots (as MCP clients do)."""
    here = daemon.root / "sub"
    note = write(here / "a.md", "the sub note\n")
    await daemon.refresh()
    r = kbctl(daemon, "read", "a.md", cwd=here)
    assert r.returncode == 0 and "the sub note" in r.stdout, r.stderr
    r = kbctl(daemon, "why", "a.md", cwd=here)
    assert r.returncode == 0 and r.stdout.strip() == f"{note}: indexed"
    why = json.loads(kbctl(daemon, "why", "a.md", "--json", cwd=here).stdout)
    assert why == {"path": str(note), "indexed": True, "reason": "indexed"}  # no id, no type
    r = kbctl(daemon, "reindex", "--wait", "a.md", cwd=here)
    assert r.returncode == 0 and "1 files checked" in r.stdout, r.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (["read", "sub/a.md"], ["why", "sub/a.md"], ["reindex", "--wait", "sub/a.md"]):
        assert kbctl(daemon, *args, cwd=elsewhere).returncode == 0, args


# ------------------------------------------------------------------ no roots


@pytest.mark.slow
async def test_removing_the_last_root_leaves_a_config_the_daemon_runs_with(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    write(root / "a.md", "last root standing\n")
    config = tmp_path / "kb.toml"
    config.write_text(f'roots = ["{root}"]\n')
    d = make_daemon(root)
    d.roots = []  # from the config file, as under systemd
    d.extra_args = ["--config", str(config)]
    await d.start()
    r = kbctl(d, "roots", "remove", str(root))
    assert r.returncode == 0, r.stderr
    assert tomllib.loads(config.read_text())["roots"] == []
    r = kbctl(d, "status")
    assert "no roots: add one with kbctl roots add PATH" in r.stdout
    assert kbctl(d, "roots").stdout == "no roots: add one with kbctl roots add PATH\n"

    # A reload of that file is accepted, and a restart on it starts.
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: _logged(d, "reloaded: 0 root(s)"))
    async with d.client() as c:
        status = await c.status()
    assert status.roots == [] and status.config_error == ""
    assert d.stop() == 0
    await d.start()
    async with d.client() as c:
        assert (await c.status()).roots == []
        assert (await c.search("standing")).hits == []
    doctor = kbctl(d, "doctor")
    assert "warn  no roots are indexed" in doctor.stdout

    r = kbctl(d, "roots", "add", str(root))
    assert r.returncode == 0, r.stderr
    await wait_for(lambda: _found(d, "standing"))


@pytest.mark.slow
async def test_a_daemon_without_any_roots_runs_and_says_so(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.roots = []
    await d.start()
    async with d.client() as c:
        assert (await c.status()).roots == []
        with pytest.raises(DaemonError) as caught:
            await c.read_file("a.md")
        assert caught.value.code == "outside_roots" and "no roots" in caught.value.message
    assert "no roots to index" in d.log()


# ------------------------------------------------------------------ refused reloads


@pytest.mark.slow
async def test_a_refused_reload_shows_in_status_and_doctor_until_a_good_one(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    config = tmp_path / "kb.toml"
    good = f'roots = ["{root}"]\n'
    config.write_text(good)
    d = make_daemon(root)
    d.roots = []
    d.extra_args = ["--config", str(config)]
    await d.start()
    assert d.proc is not None

    config.write_text(good + "scan_intervall = 5\n")  # a typo in a key
    d.proc.send_signal(signal.SIGHUP)

    async def refused() -> str:
        async with d.client() as c:
            return (await c.status()).config_error

    reason = await wait_for(refused)
    assert "unknown setting(s) scan_intervall" in reason
    assert "CONFIG RELOAD REFUSED" in kbctl(d, "status").stdout
    doctor = kbctl(d, "doctor")
    assert doctor.returncode == 1
    assert "FAIL  the daemon refused its last configuration reload" in doctor.stdout
    assert json.loads(kbctl(d, "status", "--json").stdout)["config_error"] == reason

    config.write_text(good)
    d.proc.send_signal(signal.SIGHUP)

    async def cleared() -> bool:
        return not await refused()

    await wait_for(cleared)
    assert "CONFIG RELOAD REFUSED" not in kbctl(d, "status").stdout
    doctor = kbctl(d, "doctor")
    assert "configuration reload" not in doctor.stdout and doctor.returncode == 0


# ------------------------------------------------------------------ doctor


@pytest.mark.slow
async def test_doctor_after_a_full_reindex_finds_the_index_whole(daemon: Daemon) -> None:
    """A pooled reader that searched before the writer rewrote the index held FTS5's old
    structure, and its integrity check called the new index malformed."""
    for i in range(200):  # more than one page per segment: a stale view then fails
        write(daemon.root / f"n{i}.md", f"# Note {i}\nalpha beta gamma {i} delta\n")
    await daemon.refresh()
    assert await daemon.search_paths("alpha")
    assert kbctl(daemon, "doctor").returncode == 0
    r = kbctl(daemon, "reindex", "--full", "--wait")
    assert r.returncode == 0, r.stderr
    doctor = kbctl(daemon, "doctor")
    assert "ok    index integrity" in doctor.stdout, doctor.stdout
    assert doctor.returncode == 0


@pytest.mark.slow
async def test_doctor_reports_a_really_damaged_full_text_index(daemon: Daemon) -> None:
    for i in range(40):
        write(daemon.root / f"n{i}.md", f"# Note {i}\nalpha beta gamma {i} delta\n")
    await daemon.refresh()
    # Damage as a failing disk would leave it: a page of the unstemmed index zeroed,
    # written into the live file by a connection of the test's own.
    conn = sqlite.connect(daemon.db_path, isolation_level=None)
    try:
        conn.execute(
            "UPDATE docs_exact_data SET block = zeroblob(length(block))"
            " WHERE id = (SELECT max(id) FROM docs_exact_data)"
        )
    finally:
        conn.close()
    doctor = kbctl(daemon, "doctor")
    assert doctor.returncode == 1
    assert "FAIL  index integrity: malformed inverted index" in doctor.stdout
    assert "docs_exact" in doctor.stdout


# ------------------------------------------------------------------ pipes


@pytest.mark.slow
@pytest.mark.parametrize("args", [["doctor"], ["status"], ["status", "--json"], ["roots"]])
async def test_kbctl_into_a_closed_pipe_ends_quietly(daemon: Daemon, args: list[str]) -> None:
    """``kbctl doctor | true``: the reader is gone before kbctl writes a byte."""
    command = [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        code = proc.wait(timeout=30)
    assert stderr == ""
    assert code in (0, 141)


# ------------------------------------------------------------------ one vocabulary


@pytest.mark.slow
async def test_status_json_uses_the_names_and_times_of_get_index_stats(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "one note\n")
    await daemon.refresh()
    r = kbctl(daemon, "status", "--json")
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)
    async with mcp_stdio(daemon.socket) as client:
        mcp = structured(await client.call_tool("get_index_stats", {}))
    assert set(cli) == set(mcp)
    assert "id" not in cli and "type" not in cli
    assert ISO.match(cli["last_scan"]) and cli["last_scan"] == mcp["last_scan"]
    assert cli["roots"] == mcp["roots"]
    assert cli["indexed_files"] == mcp["indexed_files"] == 1


@pytest.mark.parametrize("seconds", [5, 75, 100, 3000, 5400, 7200, 20_000, 100_000, 400_000])
def test_both_front_ends_word_an_age_the_same(seconds: float) -> None:
    now = 2_000_000_000.0
    assert render.ago(now - seconds, now) == results.ago(now - seconds, now)


async def _logged(d: Daemon, text: str) -> bool:
    return text in d.log()


async def _found(d: Daemon, query: str) -> bool:
    return bool(await d.search_paths(query))
