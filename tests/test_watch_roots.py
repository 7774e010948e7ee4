"""Roots added and removed while the daemon runs, persisted to the config file; the
``kbctl roots`` and ``kbctl why`` commands; the config editor on its own."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.ctl import roots as roots_cmd
from kbindex.daemon.config_file import ConfigError, persist_add, persist_remove
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
        assert reply.config_path == str(config_of(d))
        await until_paths(c, "orbitword", ["a.md", "b.md"])
        listed = tomllib.loads(config_of(d).read_text())["roots"]
        assert listed == [str(d.root), str(other)]

        write(other / "c.md", "watched at once orbitword\n")
        assert await until_paths(c, "orbitword", ["a.md", "b.md", "c.md"]) < 1.0
        status = await settled(c)
        assert [r.state for r in status.roots] == ["live", "live"]

        reply = await c.remove_root(str(other))
        assert [r.path for r in reply.roots] == [str(d.root)]
        assert "2 documents removed" in reply.message
        await until_paths(c, "orbitword", ["a.md"])
        assert tomllib.loads(config_of(d).read_text())["roots"] == [str(d.root)]
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
