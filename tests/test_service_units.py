"""``kbctl service install|uninstall|status`` against a temporary XDG_CONFIG_HOME.

There is no systemd user manager in CI containers, so a fake ``systemctl`` on PATH
stands in for it: a shell script that records its arguments and answers the way a
reachable (or, with FAKE_SYSTEMCTL_MODE=unreachable, an unreachable) manager would.
It checks which commands kbctl runs, not what systemd does with them; the unit files
themselves are checked by ``systemd-analyze verify`` when that binary is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import platformdirs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kbindex.ctl import hardening, service
from kbindex.ctl.main import build_parser

REPO = Path(__file__).resolve().parents[1]

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
if [ "$FAKE_SYSTEMCTL_MODE" = unreachable ]; then
    echo "Failed to connect to bus: No medium found" >&2
    exit 1
fi
case "$2" in
    show) echo "Version=252" ;;
    status) echo "* kbindexd.socket - kbindex daemon socket"; exit 3 ;;
esac
exit 0
"""


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("KBINDEX_CONFIG", raising=False)
    monkeypatch.delenv("KBINDEX_SOCKET", raising=False)
    return home


@pytest.fixture
def systemctl_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake systemctl first on PATH; returns the file it logs its argv to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text(FAKE_SYSTEMCTL)
    fake.chmod(0o755)
    log = tmp_path / "systemctl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSTEMCTL_LOG", str(log))
    monkeypatch.delenv("FAKE_SYSTEMCTL_MODE", raising=False)
    return log


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "my notes"
    path.mkdir()
    return path


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def exec_start(unit_text: str) -> list[str]:
    (line,) = [x for x in unit_text.splitlines() if x.startswith("ExecStart=")]
    return service.exec_words(line.removeprefix("ExecStart="))


def test_install_writes_units_config_and_enables_the_socket(
    config_home: Path, systemctl_log: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.install([root], config_home=config_home) == 0

    units = config_home / "systemd" / "user"
    config = config_home / "kbindex" / "config.toml"
    assert sorted(p.name for p in units.iterdir()) == ["kbindexd.service", "kbindexd.socket"]
    assert f'roots = ["{root}"]' in config.read_text()
    unit = (units / "kbindexd.service").read_text()
    assert exec_start(unit) == [
        *service.daemon_command(),
        "--socket=%t/kbindex/kbindex.sock",
        f"--state-dir={Path(platformdirs.user_state_dir('kbindex'))}",
        "--config",
        str(config),
    ]
    assert "@" not in unit.replace("@system-service", "")
    assert (units / "kbindexd.socket").read_text() == service.unit_template("kbindexd.socket")
    assert calls(systemctl_log) == [
        "--user show --property=Version",
        "--user daemon-reload",
        "--user enable --now kbindexd.socket",
        "--user try-restart kbindexd.service",
    ]
    assert "installed kbindexd.service and kbindexd.socket" in capsys.readouterr().out
    assert service.installed_units_in_sync(config_home) == []


def test_exec_start_is_the_kbindexd_script_next_to_the_interpreter() -> None:
    command = service.daemon_command()
    assert len(command) == 1
    assert command[0] == str(Path(sys.executable).absolute().parent / "kbindexd")


def test_other_configured_roots_are_left_alone_and_passed_as_arguments(
    config_home: Path, systemctl_log: Path, root: Path, tmp_path: Path
) -> None:
    config = config_home / "kbindex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'roots = ["{tmp_path}"]\n')
    assert service.install([root], config_home=config_home) == 0
    assert config.read_text() == f'roots = ["{tmp_path}"]\n'
    unit = (config_home / "systemd/user/kbindexd.service").read_text()
    assert exec_start(unit)[-2:] == ["--", str(root)]


def test_roots_already_in_the_config_are_not_repeated(
    config_home: Path, systemctl_log: Path, root: Path
) -> None:
    config = config_home / "kbindex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'log_level = "debug"\nroots = ["{root}"]\n')
    assert service.install([root], config_home=config_home) == 0
    unit = (config_home / "systemd/user/kbindexd.service").read_text()
    assert exec_start(unit)[-1] == str(config)


def test_roots_are_added_to_an_existing_config_without_them(
    config_home: Path, systemctl_log: Path, root: Path
) -> None:
    config = config_home / "kbindex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('log_level = "debug"\n')
    assert service.install([root], config_home=config_home) == 0
    assert tomllib.loads(config.read_text()) == {"roots": [str(root)], "log_level": "debug"}


def test_install_without_any_roots_fails_before_writing(
    config_home: Path, systemctl_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.install([], config_home=config_home) == 2
    assert "no roots to index" in capsys.readouterr().err
    assert not config_home.exists()
    assert calls(systemctl_log) == []


def test_install_with_a_missing_root_fails(
    config_home: Path, systemctl_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.install([tmp_path / "gone"], config_home=config_home) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_print_writes_and_runs_nothing(
    config_home: Path, systemctl_log: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.install([root], config_home=config_home, print_only=True) == 0
    out = capsys.readouterr().out
    assert "[Socket]" in out
    assert "ExecStart=" in out
    assert not config_home.exists()
    assert calls(systemctl_log) == []


def test_without_systemctl_units_are_written_and_that_is_said(
    config_home: Path,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert service.install([root], config_home=config_home) == 1
    out = capsys.readouterr().out.splitlines()
    (line,) = [x for x in out if x.startswith("systemctl")]
    assert line.startswith("systemctl not found: wrote kbindexd.service and kbindexd.socket to")
    assert (config_home / "systemd/user/kbindexd.socket").exists()


def test_unreachable_user_manager_is_said_in_one_line(
    config_home: Path,
    systemctl_log: Path,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_SYSTEMCTL_MODE", "unreachable")
    assert service.install([root], config_home=config_home) == 1
    out = capsys.readouterr().out
    assert "no systemd user manager reachable (Failed to connect to bus" in out
    assert calls(systemctl_log) == ["--user show --property=Version"]

    assert service.status(config_home=config_home) == 1
    assert "cannot ask systemd" in capsys.readouterr().out


def test_uninstall_disables_and_removes(config_home: Path, systemctl_log: Path, root: Path) -> None:
    assert service.install([root], config_home=config_home) == 0
    systemctl_log.unlink()
    assert service.uninstall(config_home=config_home) == 0
    assert list((config_home / "systemd" / "user").iterdir()) == []
    assert (config_home / "kbindex" / "config.toml").exists()
    assert calls(systemctl_log) == [
        "--user show --property=Version",
        "--user disable --now kbindexd.socket",
        "--user stop kbindexd.service",
        "--user daemon-reload",
        "--user reset-failed kbindexd.service kbindexd.socket",
    ]


def test_status_passes_systemctl_through(
    config_home: Path, systemctl_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service.status(config_home=config_home) == 3
    out = capsys.readouterr().out
    assert "kbindexd.socket - kbindex daemon socket" in out
    assert "warning: kbindexd.service is not installed" in out
    assert calls(systemctl_log)[-1] == (
        "--user status --no-pager --lines=10 kbindexd.service kbindexd.socket"
    )


def test_units_out_of_sync_are_reported(config_home: Path, systemctl_log: Path, root: Path) -> None:
    assert service.install([root], config_home=config_home) == 0
    unit = config_home / "systemd/user/kbindexd.service"
    text = unit.read_text()
    unit.write_text(text.replace(service.daemon_command()[0], "/opt/old/bin/kbindexd"))
    (problem,) = service.installed_units_in_sync(config_home)
    assert "/opt/old/bin/kbindexd, which is missing" in problem

    unit.write_text(text.replace(service.daemon_command()[0], shutil.which("sh") or "/bin/sh"))
    (problem,) = service.installed_units_in_sync(config_home)
    assert "not this installation's" in problem

    unit.write_text(text.replace("WatchdogSec=60", "WatchdogSec=5"))
    (problem,) = service.installed_units_in_sync(config_home)
    assert "differs from what this kbindex version and configuration need" in problem

    (config_home / "systemd/user/kbindexd.socket").unlink()
    assert any("kbindexd.socket is not installed" in p for p in service.installed_units_in_sync())


def test_add_parser_wires_the_subcommands(
    config_home: Path, systemctl_log: Path, root: Path
) -> None:
    parser = build_parser()
    args = parser.parse_args(["service", "install", "--root", str(root)])
    assert args.func(args) == 0
    args = parser.parse_args(["service", "status"])
    assert args.func(args) == 3
    args = parser.parse_args(["service", "uninstall"])
    assert args.func(args) == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["service"])


def test_systemd_dir_holds_the_packaged_units() -> None:
    for name in service.UNITS:
        assert (REPO / "systemd" / name).read_text() == service.unit_template(name)


@given(st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=40))
def test_exec_words_round_trip(word: str) -> None:
    assert service.exec_words(f"/bin/x {service.exec_word(word)}") == ["/bin/x", word]


def test_control_characters_are_refused() -> None:
    with pytest.raises(service.ServiceError):
        service.exec_word("a\nb")


@pytest.mark.parametrize("version", [252, 254])
def test_generated_units_pass_systemd_analyze_verify(
    tmp_path: Path, root: Path, version: int
) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed (Debian/Ubuntu package: systemd)")
    odd_root = tmp_path / 'odd 50% "$HOME" \\ root'
    odd_root.mkdir()
    needs = hardening.Needs(tmp_path / "state 50%", (odd_root,), (odd_root,), tcp=True)
    units = service.render_units(
        service.daemon_command(),
        ["--config", str(tmp_path / "c.toml"), "--", str(odd_root)],
        needs,
        version,
    )
    out = tmp_path / "units"
    out.mkdir()
    for name, text in units.items():
        (out / name).write_text(text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(
        [analyze, "--user", "verify", *(str(out / n) for n in service.UNITS)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=30,
        check=False,
    )
    # verify exits 0 on unknown or malformed keys and only warns, so warnings fail too;
    # systemd 252's verify does not know Type=notify-reload (253), so 254's unit is
    # checked for everything but that.
    errors = [
        line
        for line in result.stderr.splitlines()
        if not (version >= 253 and "notify-reload" in line)
    ]
    assert result.returncode == 0 or errors, result.stderr
    assert errors == []
    assert exec_start(units["kbindexd.service"])[-1] == str(odd_root)


def _service_lines(config_home: Path) -> list[str]:
    return (config_home / "systemd/user/kbindexd.service").read_text().splitlines()


def test_the_sandbox_follows_the_configuration(
    config_home: Path, systemctl_log: Path, root: Path, tmp_path: Path
) -> None:
    config = config_home / "kbindex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'roots = ["{root}"]\n')
    assert service.install([], config_home=config_home) == 0
    lines = _service_lines(config_home)
    state = Path(platformdirs.user_state_dir("kbindex"))
    assert f"ReadWritePaths=-%t/kbindex -{state}" in lines
    assert "RestrictAddressFamilies=AF_UNIX" in lines
    assert service.installed_units_in_sync(config_home) == []

    notes = tmp_path / "notes"
    notes.mkdir()
    config.write_text(
        f'roots = ["{root}", "{notes}"]\nstate_dir = "kb-state"\nbackend = "postgres"\n'
        f'dsn = "postgresql://kb@db.example:5432/kb"\n[root."{notes}"]\nwritable = true\n'
    )
    (problem,) = service.installed_units_in_sync(config_home)
    assert "rerun kbctl service install" in problem
    assert service.install([], config_home=config_home) == 0
    lines = _service_lines(config_home)
    assert f"ReadWritePaths=-%t/kbindex -{config.parent / 'kb-state'} -{notes}" in lines
    assert (config.parent / "kb-state").is_dir()  # ReadWritePaths= opens only what exists
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" in lines
    assert service.installed_units_in_sync(config_home) == []

    config.write_text(f'roots = ["{root}"]\ndsn = "postgresql:///kb?host=/run/postgresql"\n')
    assert service.install([], config_home=config_home) == 0
    assert "RestrictAddressFamilies=AF_UNIX" in _service_lines(config_home)


def test_tmp_is_private_unless_a_root_or_the_state_is_there() -> None:
    home = Path("/home/u")
    needs = hardening.Needs(home / ".local/state/kbindex", (home / "notes",), (), tcp=False)
    assert "PrivateTmp=yes" in hardening.sandbox_lines(needs)
    needs = hardening.Needs(Path("/var/tmp/kb-state"), (home / "notes",), (), tcp=False)
    assert "PrivateTmp=no" in hardening.sandbox_lines(needs)


def test_a_root_in_tmp_gets_the_real_tmp(config_home: Path, systemctl_log: Path) -> None:
    in_tmp = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        assert service.install([in_tmp], config_home=config_home) == 0
    finally:
        in_tmp.rmdir()
    lines = _service_lines(config_home)
    assert "PrivateTmp=no" in lines
    assert "ReadWritePaths=/tmp /var/tmp" in lines


def test_reload_waits_on_every_manager_version(config_home: Path, root: Path) -> None:
    needs = hardening.Needs(config_home / "state", (root,), (), tcp=False)
    on_252 = service.render_units(["/x/bin/kbindexd"], [], needs, 252)[service.SERVICE]
    assert "Type=notify" in on_252.splitlines()
    assert "ExecReload=/x/bin/kbctl --socket=%t/kbindex/kbindex.sock reload" in on_252
    on_254 = service.render_units(["/x/bin/kbindexd"], [], needs, 254)[service.SERVICE]
    assert "Type=notify-reload" in on_254.splitlines()
    assert not [line for line in on_254.splitlines() if line.startswith("ExecReload=")]


def test_an_index_left_in_the_config_folder_is_moved(
    config_home: Path, systemctl_log: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Where the units before this one kept it on systemd 252: %S was ~/.config.
    old = config_home / "kbindex"
    old.mkdir(parents=True)
    for name in ("index.sqlite3", "index.sqlite3-wal", "vectors.sqlite3"):
        (old / name).write_bytes(b"index " + name.encode())
    (old / "config.toml").write_text(f'roots = ["{root}"]\nstate_dir = "../state"\n')
    assert service.install([], config_home=config_home) == 0
    state = config_home / "state"
    assert sorted(p.name for p in state.iterdir()) == [
        "index.sqlite3",
        "index.sqlite3-wal",
        "vectors.sqlite3",
    ]
    assert (state / "index.sqlite3").read_bytes() == b"index index.sqlite3"
    assert sorted(p.name for p in old.iterdir()) == ["config.toml"]
    assert f"moved the index from {old} to {state}" in capsys.readouterr().out
    # The service was stopped first, so no daemon had the files open.
    log = calls(systemctl_log)
    assert log.index("--user stop kbindexd.service") < log.index("--user daemon-reload")
