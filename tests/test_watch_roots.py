"""Roots added and removed while the daemon runs, persisted where the roots came from
(the config file, or the state directory's record over command-line roots) and kept at
reloads and restarts; the ``kbctl roots`` and ``kbctl why`` commands; the config editor
on its own."""

from __future__ import annotations

import argparse
import json
import signal
import tomllib
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, wait_for, write
from kbindex.ctl import roots as roots_cmd
from kbindex.daemon.backends import BACKENDS
from kbindex.daemon.config_file import ConfigError, persist_add, persist_remove
from kbindex.daemon.settings import Settings, SettingsError, add_arguments, load
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.client import DaemonError
from kbindex.proto.messages import ErrorCode
from watch_helpers import settled, until_paths

pytestmark = pytest.mark.anyio


def config_of(d: Daemon) -> Path:
    return d.base / "config" / "kbindex" / "config.toml"


@pytest.mark.slow
async def test_add_and_remove_a_root_at_runtime(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    d = make_daemon()
    other = tmp_path / "other"
    write(d.root / "a.md", "first root orbitword\n")
    write(other / "b.md", "second root orbitword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "orbitword", ["a.md"])
        reply = await c.add_root(str(other))
        assert [r.path for r in reply.roots] == [str(d.root), str(other)]
        # Roots given on the command line: the change is recorded in the state
        # directory (the config file's roots would not apply to this daemon).
        record = d.state_dir / "roots.json"
        assert reply.config_path == str(record)
        assert f"recorded in {record}" in reply.message
        await until_paths(c, "orbitword", ["a.md", "b.md"])
        assert json.loads(record.read_text())["added"] == [str(other)]
        assert not config_of(d).exists()

        write(other / "c.md", "watched at once orbitword\n")
        assert await until_paths(c, "orbitword", ["a.md", "b.md", "c.md"]) < 1.0
        status = await settled(c)
        assert [r.state for r in status.roots] == ["live", "live"]

        reply = await c.remove_root(str(other))
        assert [r.path for r in reply.roots] == [str(d.root)]
        assert "2 documents removed" in reply.message
        await until_paths(c, "orbitword", ["a.md"])
        assert json.loads(record.read_text())["added"] == []
        write(other / "d.md", "no longer watched orbitword\n")
        assert (await settled(c)).indexed_files == 1


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        (lambda root, tmp: root / "inside", "lies inside root"),
        (lambda root, tmp: root.parent, "lies inside"),
        (lambda root, tmp: tmp / "nowhere", "does not exist"),
        (lambda root, tmp: root / "file.md", "is not a directory"),
        (lambda root, tmp: root, "already a root"),
    ],
)
async def test_bad_roots_are_refused(
    daemon: Daemon, tmp_path: Path, make_path: object, message: str
) -> None:
    (daemon.root / "inside").mkdir()
    write(daemon.root / "file.md", "x")
    path = make_path(daemon.root, tmp_path)  # type: ignore[operator]
    async with daemon.client() as c:
        with pytest.raises(DaemonError) as caught:
            await c.add_root(str(path))
        assert caught.value.code == ErrorCode.INVALID_ARGUMENT
        assert message in caught.value.message
    assert not config_of(daemon).exists(), "a refused root writes nothing"


async def test_removing_an_unknown_root_is_an_error(daemon: Daemon, tmp_path: Path) -> None:
    async with daemon.client() as c:
        with pytest.raises(DaemonError) as caught:
            await c.remove_root(str(tmp_path))
        assert caught.value.code == ErrorCode.INVALID_ARGUMENT


@pytest.mark.slow
async def test_kbctl_roots_and_why(
    daemon: Daemon,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    roots_cmd.add_parser(sub)
    roots_cmd.add_why_parser(sub)
    write(daemon.root / "note.md", "why word\n")
    (daemon.root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(daemon.root / ".gitignore", "*.txt\n")
    write(daemon.root / "x.txt", "text\n")
    monkeypatch.chdir(daemon.root)

    def run(*argv: str) -> str:
        args = parser.parse_args(argv)
        with BlockingClient.connect(daemon.socket, client_name="tests") as c:
            assert args.run(c, args) == 0
        return capsys.readouterr().out

    async with daemon.client() as c:
        await until_paths(c, "why", ["note.md"])
    assert run("why", "note.md") == f"{daemon.root}/note.md: indexed\n"
    out = run("why", "x.txt")
    assert "ignored" in out and ".gitignore line 1" in out
    assert "outside every root" in run("why", str(tmp_path))
    listing = run("roots")
    assert listing.startswith(f"{daemon.root}  live  1 files")
    assert "last reconcile" in listing
    other = tmp_path / "second"
    other.mkdir()
    assert "added" in run("roots", "add", str(other))
    assert str(other) in run("roots")
    assert "removed" in run("roots", "remove", str(other))


def test_config_edit_keeps_comments_and_other_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "# my kbindex config\n"
        'roots = [\n    "~/notes",  # the main one\n    "docs",\n]  # trailing\n'
        "max_file_size_mb = 5\n\n"
        '[root."~/notes"]\nexclude = ["drafts/"]\n'
    )
    home_notes = Path("~/notes").expanduser()
    persist_add(config, tmp_path / "new", [])
    text = config.read_text()
    assert text.startswith("# my kbindex config\nroots = [")
    assert "]  # trailing\nmax_file_size_mb = 5" in text
    values = tomllib.loads(text)
    assert values["roots"] == ["~/notes", "docs", str(tmp_path / "new")]
    assert values["root"] == {"~/notes": {"exclude": ["drafts/"]}}
    persist_remove(config, tmp_path / "docs", [])  # relative entries resolve from the file
    assert tomllib.loads(config.read_text())["roots"] == ["~/notes", str(tmp_path / "new")]
    # The daemon refuses a [root."..."] table for a path that is not a root, so a root
    # with a table is not removed from the file: that would leave one it cannot start with.
    before = config.read_text()
    with pytest.raises(ConfigError, match=r'\[root."~/notes"\] table'):
        persist_remove(config, Path(str(home_notes)), [])
    assert config.read_text() == before


def test_config_without_roots_starts_from_the_running_ones(tmp_path: Path) -> None:
    config = tmp_path / "sub" / "config.toml"
    persist_add(config, tmp_path / "b", [tmp_path / "a"])
    assert tomllib.loads(config.read_text()) == {
        "roots": [str(tmp_path / "a"), str(tmp_path / "b")]
    }
    assert config.stat().st_mode & 0o777 == 0o600
    other = tmp_path / "other.toml"
    other.write_text('# comment\n\nlog_level = "debug"\n')
    persist_add(other, tmp_path / "c", [])
    assert other.read_text().startswith("# comment\n\nroots = [")
    assert tomllib.loads(other.read_text())["log_level"] == "debug"


def test_config_symlink_is_edited_at_its_target(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "kbindex.toml"
    write(target, 'roots = ["/a"]\n')
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    persist_add(link, tmp_path / "b", [])
    assert link.is_symlink()
    assert tomllib.loads(target.read_text())["roots"] == ["/a", str(tmp_path / "b")]


def test_config_that_cannot_be_edited_safely_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    for text in ("roots = 'not a list'\n", "roots = [\n", '"roots" = ["/a"]\n'):
        config.write_text(text)
        with pytest.raises(ConfigError):
            persist_add(config, tmp_path, [])
        assert config.read_text() == text


# ------------------------------------------------------------------ kept at reloads and restarts


@pytest.mark.slow
@pytest.mark.parametrize("given_by", ["arguments", "environment", "config"])
async def test_roots_changed_at_runtime_survive_a_reload_and_a_restart(
    make_daemon: MakeDaemon, tmp_path: Path, given_by: str
) -> None:
    """However the daemon got its roots (command line, KBINDEX_ROOTS, config file), a
    root added and one removed with kbctl stay so through a real SIGHUP and a restart."""
    kept, dropped, added = tmp_path / "kept", tmp_path / "dropped", tmp_path / "added"
    write(kept / "k.md", "kept stayword\n")
    write(dropped / "d.md", "dropped stayword\n")
    write(added / "a.md", "added stayword\n")
    d = make_daemon(kept, dropped)
    if given_by == "environment":
        d.roots = []
        d.extra_env["KBINDEX_ROOTS"] = f"{kept}:{dropped}"
    elif given_by == "config":
        d.roots = []
        config = tmp_path / "kb.toml"
        config.write_text(f'roots = ["{kept}", "{dropped}"]\n')
        d.extra_args = ["--config", str(config)]
    await d.start()
    assert d.kbctl("roots", "add", str(added)).returncode == 0
    assert d.kbctl("roots", "remove", str(dropped)).returncode == 0
    wanted = [str(kept), str(added)]

    async def roots_now() -> list[str]:
        async with d.client() as c:
            await until_paths(c, "stayword", ["a.md", "k.md"])
            return [r.path for r in (await c.status()).roots]

    assert await roots_now() == wanted
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    line = await wait_for(lambda: _log_line(d, "reloaded:"))
    assert "0 added, 0 removed" in line, line
    if given_by != "config":
        assert f"kept from kbctl roots add|remove: {added} added, {dropped} removed" in line
    assert await roots_now() == wanted
    assert d.stop() == 0
    await d.start()
    assert await roots_now() == wanted


async def _log_line(d: Daemon, text: str) -> str:
    for line in d.log_path.read_text(errors="replace").splitlines():
        if text in line:
            return line
    return ""


def _settings(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, tuple(BACKENDS))
    return load(parser.parse_args(argv), env or {"XDG_CONFIG_HOME": "/nonexistent"})


def test_the_record_is_laid_over_the_given_roots_and_never_stops_a_start(tmp_path: Path) -> None:
    """Roots from the command line or KBINDEX_ROOTS, then the record: a removed root stays
    out even when named again, an added root that can no longer be one is left out with
    the reason, a record that is not one stops the start with what to do. A daemon whose
    roots come from its config file does not read the record (its changes are in the file)."""
    a, b, c, gone = (tmp_path / n for n in ("a", "b", "c", "gone"))
    for root in (a, b, c):
        root.mkdir()
    (b / "inner").mkdir()
    state = tmp_path / "state"
    state.mkdir()
    record = state / "roots.json"
    record.write_text(
        json.dumps({"added": [str(c), str(gone), str(b / "inner")], "removed": [str(a)]})
    )
    for argv, env in (
        ([str(a), str(b)], None),
        ([], {"KBINDEX_ROOTS": f"{a}:{b}", "XDG_CONFIG_HOME": "/nonexistent"}),
    ):
        s = _settings([*argv, "--state-dir", str(state)], env)
        assert s.roots == (b, c)
        assert s.roots_kept == (f"{c} added", f"{a} removed")
        assert len(s.roots_left_out) == 2
        assert "does not exist" in s.roots_left_out[0] and str(gone) in s.roots_left_out[0]
        assert f"lies inside root {b}" in s.roots_left_out[1]
    config = tmp_path / "kb.toml"
    config.write_text(f'roots = ["{a}"]\n')
    assert _settings(["--config", str(config), "--state-dir", str(state)]).roots == (a,)

    record.write_text('{"added": "not a list"}')
    with pytest.raises(SettingsError, match="delete it to start from the roots given"):
        _settings([str(a), "--state-dir", str(state)])
