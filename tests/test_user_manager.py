"""The service under a real systemd user manager, as a user installs and runs it.

This machine's root is booted in a throwaway container (``tests/nspawn.py``), once with
the host's systemd and once with the version in ``$KBINDEX_SYSTEMD_DEBS`` (``.ci/run``
downloads Debian's backports, systemd 254, where the mount-namespace options take effect
for user units). In each, an unprivileged user with lingering builds a virtualenv with
the system Python from the source tree (offline: the wheels are downloaded on the host
first), runs ``kbctl service install``, and uses the service: socket activation,
readiness, the watchdog, reload, stop and restart, notes, grep, search by meaning, roots
outside $HOME and in /tmp, PostgreSQL over a Unix socket and over TCP, and a broken
configuration fixed without ``reset-failed``. One container serves every check of its
version: they run in order and build on each other.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nspawn
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
USER = "kbuser"
UID = 4242
HOME = f"/home/{USER}"
VENV = "/opt/kbindex"
KBCTL = f"{VENV}/bin/kbctl"
CONFIG = f"{HOME}/.config/kbindex/config.toml"
STATE = f"{HOME}/.local/state/kbindex"
IN_TMP = "/tmp/kbroot"
OUTSIDE_HOME = "/srv/kbdocs"
BASE_CONFIG = f"""roots = ["~/notes", "{OUTSIDE_HOME}", "{IN_TMP}"]
scan_interval_seconds = 3600
[root."~/notes"]
writable = true
"""
PG_PASSWORD = "kb-secret"  # a throwaway role in a throwaway container
UNIX_DSN = "postgresql:///kb?host=/var/run/postgresql"
TCP_DSN = f"postgresql://{USER}:{PG_PASSWORD}@127.0.0.1:5432/kb"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A folder of our own for the module's fixtures: pytest's numbered folders are
    removed by any other pytest run of the same user starting meanwhile."""
    path = Path(tempfile.mkdtemp(prefix="kbindex-manager-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def wheels(scratch: Path) -> Path:
    """Every wheel the install needs, for the system Python: the container is offline."""
    reason = nspawn.unavailable()
    if reason:
        pytest.skip(reason)
    base = scratch / "wheels"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(base / "pip")], check=True)
    download = subprocess.run(
        [str(base / "pip/bin/pip"), "download", "-q", "-d", str(base / "wheels"),
         f"{REPO}[semantic,postgres]", "setuptools>=69"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if download.returncode != 0:
        pytest.skip(f"cannot download the wheels to install: {download.stderr[-500:]}")
    return base / "wheels"


@pytest.fixture(scope="module")
def venv(scratch: Path) -> Path:
    """The virtualenv's folder, shared by both containers (the same system Python and
    path in each): built by the user in the first, used as it is in the second."""
    path = scratch / "venv"
    path.mkdir()
    os.chown(path, UID, UID)
    return path


@pytest.fixture(scope="module")
def source(scratch: Path) -> Path:
    tar = scratch / "kbindex.tar"
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-C", str(REPO), "--null", "-T", "-", "-cf", str(tar)],
                   input=files, check=True)  # fmt: skip
    return tar


@pytest.fixture(scope="module", params=["host", "debs"])
def machine(
    request: pytest.FixtureRequest, wheels: Path, venv: Path, source: Path
) -> Iterator[nspawn.Machine]:
    debs = None
    if request.param == "debs":
        raw = os.environ.get(nspawn.DEBS_ENV)
        if not raw or not list(Path(raw).glob("systemd_*.deb")):
            pytest.skip(f"no systemd packages in ${nspawn.DEBS_ENV} (.ci/run downloads them)")
        debs = Path(raw)
    binds = {"/srv/wheels": wheels, "/srv/kbindex.tar": source}
    m = nspawn.Machine(f"kb{os.getpid()}{request.param}", debs, binds, {VENV: venv})
    try:
        try:
            m.boot()
        except nspawn.BootFailed as exc:
            pytest.skip(f"the container did not start: {exc}")
        _set_up(m)
        yield m
    finally:
        m.close()


def _set_up(m: nspawn.Machine) -> None:
    m.run(
        f"useradd -m -u {UID} {USER} && loginctl enable-linger {USER}"
        f" && mkdir -p {OUTSIDE_HOME} {IN_TMP} && chown {USER}: {OUTSIDE_HOME} {IN_TMP}"
    )
    m.wait("systemctl --user is-system-running", user=USER)
    u = m.run("cat /proc/self/cgroup; systemctl --version | head -1", user=USER).stdout
    print(f"{m.name}: {u}")
    if not Path(m.binds_rw[VENV], "bin", "kbctl").exists():
        # The README's install, with the system Python, offline from the wheels.
        m.run(
            f"mkdir ~/src && tar -C ~/src -xf /srv/kbindex.tar && python3 -m venv {VENV}"
            f" && {VENV}/bin/pip install -q --no-index --find-links /srv/wheels"
            " ~/src'[semantic,postgres]'",
            user=USER,
            timeout=600,
        )
    files = {
        "~/notes/plan.md": "# Plan\nThe quarterly roadmap for the garden project.\n",
        "~/notes/table.md": "# Views\nThe table view draws each line lazily as you scroll.\n",
        f"{OUTSIDE_HOME}/srv.md": "outsidehome words live here\n",
        f"{IN_TMP}/tmp.md": "tmproot words live here\n",
    }
    script = " && ".join(
        f"mkdir -p $(dirname {path}) && printf '%s' '{text}' > {path}"
        for path, text in files.items()
    )
    m.run(f"{script} && mkdir -p ~/.config/kbindex && cat > {CONFIG}", user=USER,
          stdin=BASE_CONFIG)  # fmt: skip


def kbctl(m: nspawn.Machine, args: str, *, check: bool = True, stdin: str | None = None) -> str:
    return m.run(f"{KBCTL} {args}", user=USER, check=check, stdin=stdin).stdout


def status(m: nspawn.Machine) -> dict[str, Any]:
    return dict(json.loads(kbctl(m, "status --json")))


def show(m: nspawn.Machine, unit: str, prop: str) -> str:
    out = m.run(f"systemctl --user show {unit} -p {prop} --value", user=USER).stdout
    return out.strip()


def _manager_version(m: nspawn.Machine) -> int:
    raw = m.run("systemctl --user show -p Version --value", user=USER).stdout
    return int(raw.strip().split(".")[0])


def wait_status(m: nspawn.Machine, probe: str, *, timeout: float = 60) -> None:
    """Until ``kbctl status --json`` piped to a python expression on ``s`` is true."""
    check = f"import json,sys; s=json.load(sys.stdin); sys.exit(0 if ({probe}) else 1)"
    try:
        m.wait(f"{KBCTL} status --json | python3 -c {shlex.quote(check)}", user=USER,
               timeout=timeout)  # fmt: skip
    except AssertionError as exc:
        shown = m.run(f"{KBCTL} status", user=USER, check=False)
        log = m.run("journalctl -q --no-pager -n 15 _SYSTEMD_USER_UNIT=kbindexd.service",
                    check=False).stdout  # fmt: skip
        raise AssertionError(f"{exc}\n{shown.stdout}{shown.stderr}\n{log}") from None


def test_install_and_socket_activation(machine: nspawn.Machine) -> None:
    out = kbctl(machine, "service install")
    assert "installed kbindexd.service and kbindexd.socket" in out
    assert show(machine, "kbindexd.socket", "ActiveState") == "active"
    assert show(machine, "kbindexd.service", "ActiveState") == "inactive"
    kbctl(machine, "status")  # the first connection starts the daemon
    assert show(machine, "kbindexd.service", "ActiveState") == "active"
    wait_status(machine, "s['last_scan'] and s['indexed_files'] == 4")


def test_readiness_and_the_state_directory(machine: nspawn.Machine) -> None:
    version = _manager_version(machine)
    # Type=notify-reload from 253 on: systemctl reload waits for RELOADING=1 and READY=1.
    expected = "notify-reload" if version >= 253 else "notify"
    assert show(machine, "kbindexd.service", "Type") == expected
    machine.wait("systemctl --user show kbindexd -p StatusText | grep -q 'idle, 4 files'",
                 user=USER)  # fmt: skip
    # One state directory on every version, where the README says ($XDG_STATE_HOME).
    machine.run(f"test -f {STATE}/index.sqlite3", user=USER)
    machine.run(f"! test -e {HOME}/.config/kbindex/index.sqlite3", user=USER)


def test_an_index_an_older_unit_left_is_moved(machine: nspawn.Machine) -> None:
    # Where the units before kept it on systemd 252: %S/kbindex was ~/.config/kbindex.
    machine.run(
        f"systemctl --user stop kbindexd.service && mv {STATE}/index.sqlite3* "
        f"{HOME}/.config/kbindex/",
        user=USER,
    )
    out = kbctl(machine, "service install")
    assert f"moved the index from {HOME}/.config/kbindex to {STATE}" in out
    machine.run(f"test -f {STATE}/index.sqlite3", user=USER)
    wait_status(machine, "s['last_scan'] and s['indexed_files'] == 4")


def test_notes_grep_and_meaning(machine: nspawn.Machine) -> None:
    out = kbctl(machine, "note write inbox.md", stdin="# Inbox\nremember the zucchini seeds\n")
    assert "inbox.md" in out
    machine.run("grep -q zucchini ~/notes/inbox.md", user=USER)
    assert "zucchini" in kbctl(machine, "grep zucchini")
    assert "srv.md" in kbctl(machine, "grep outsidehome")
    assert "tmp.md" in kbctl(machine, "grep tmproot")
    assert "plan.md" in kbctl(machine, "search quarterly roadmap")
    wait_status(machine, "s['semantic'] and s['semantic']['state'] == 'ready'"
                " and not s['semantic']['backlog']", timeout=120)  # fmt: skip
    found = kbctl(machine, "search --mode semantic --limit 1 grid rendering rows")
    assert "table.md" in found


def test_reload_returns_once_in_force(machine: nspawn.Machine) -> None:
    machine.run("mkdir -p ~/more && echo reloadword > ~/more/x.md", user=USER)
    machine.run(f"sed -i 's|^roots = \\[|roots = [\"~/more\", |' {CONFIG}", user=USER)
    if _manager_version(machine) < 253:
        # The daemon is held stopped while the reload is asked for, and let go two
        # seconds later: a reload that waits for the daemon (kbctl reload) returns
        # after that, one that only sends a signal (kill -HUP) at once. (From 253 on
        # systemd sends SIGCONT with the reload signal, and Type=notify-reload waits.)
        pid = show(machine, "kbindexd", "MainPID")
        machine.run(
            f"rm -f ~/let-go && kill -STOP {pid}"
            f" && {{ (sleep 2; touch ~/let-go; kill -CONT {pid}) & }}"
            " && systemctl --user reload kbindexd && test -e ~/let-go",
            user=USER,
        )
    else:
        machine.run("systemctl --user reload kbindexd", user=USER)
    roots = [r["path"] for r in status(machine)["roots"]]
    assert f"{HOME}/more" in roots


def test_watchdog(machine: nspawn.Machine) -> None:
    dropin = "~/.config/systemd/user/kbindexd.service.d"
    machine.run(f"mkdir -p {dropin} && printf '[Service]\\nWatchdogSec=2\\nRestartSec=1\\n'"
                f" > {dropin}/watchdog.conf && systemctl --user daemon-reload"
                " && systemctl --user restart kbindexd", user=USER)  # fmt: skip
    first = show(machine, "kbindexd", "WatchdogTimestampMonotonic")
    machine.wait(f"test $(systemctl --user show kbindexd -p WatchdogTimestampMonotonic"
                 f" --value) != {first}", user=USER)  # fmt: skip
    pid = show(machine, "kbindexd", "MainPID")
    machine.run(f"kill -STOP {pid}", user=USER)  # a hung daemon: no pings
    machine.wait(f"test $(systemctl --user show kbindexd -p NRestarts --value) -ge 1"
                 f" && test $(systemctl --user show kbindexd -p MainPID --value) != {pid}"
                 " && systemctl --user is-active kbindexd", user=USER, timeout=30)  # fmt: skip
    machine.run(f"rm -r {dropin} && systemctl --user daemon-reload"
                " && systemctl --user restart kbindexd", user=USER)  # fmt: skip


def test_stop_and_restart(machine: nspawn.Machine) -> None:
    machine.run("systemctl --user stop kbindexd.service", user=USER)
    assert show(machine, "kbindexd.service", "ActiveState") == "inactive"
    assert show(machine, "kbindexd.socket", "ActiveState") == "active"
    wait_status(machine, "s['last_scan'] and s['indexed_files'] == 6")
    pid = show(machine, "kbindexd", "MainPID")
    machine.run("systemctl --user restart kbindexd.service", user=USER)
    assert show(machine, "kbindexd", "MainPID") != pid
    wait_status(machine, "s['indexed_files'] == 6")


def test_a_configuration_error_leaves_the_socket_working(machine: nspawn.Machine) -> None:
    good = machine.run(f"cat {CONFIG}", user=USER).stdout
    machine.run(f"sed -i 's|~/more|~/gone|' {CONFIG} && systemctl --user restart kbindexd",
                user=USER, check=False)  # fmt: skip
    for _ in range(8):  # more connections than the start limit's burst
        refused = machine.run(f"{KBCTL} search anything", user=USER, check=False)
        assert refused.returncode == 1
        assert f"root {HOME}/gone does not exist" in refused.stderr, refused.stderr
    assert show(machine, "kbindexd.socket", "ActiveState") == "active"
    assert "does not exist" in show(machine, "kbindexd.service", "StatusText")
    shown = kbctl(machine, "status")
    assert "CONFIGURATION REFUSED" in shown and "systemctl --user reload kbindexd" in shown
    machine.run(f"cat > {CONFIG}", user=USER, stdin=good)
    machine.run("systemctl --user reload kbindexd", user=USER)  # no reset-failed
    wait_status(machine, "not s['unconfigured'] and s['indexed_files'] == 6")


def test_postgres_over_a_unix_socket_and_tcp(machine: nspawn.Machine) -> None:
    pg = machine.run("pg_lsclusters -h | head -1", check=False).stdout.split()
    if not pg:
        pytest.skip("no PostgreSQL cluster in the container (apt install postgresql)")
    machine.run(f"pg_ctlcluster {pg[0]} {pg[1]} start || true")
    machine.wait("pg_isready -q")
    sql = f"CREATE ROLE {USER} LOGIN PASSWORD '{PG_PASSWORD}'"
    machine.run(f"runuser -u postgres -- psql -q -c \"{sql}\""
                f" && runuser -u postgres -- createdb -O {USER} kb")  # fmt: skip
    # The database's owner makes the schema once; daemons create nothing (issue 39).
    machine.run(f"/opt/kbindex/bin/kbindexd db migrate --dsn '{UNIX_DSN}'", user=USER)
    _use_backend(machine, UNIX_DSN)
    kbctl(machine, "service install")
    machine.run("systemctl --user restart kbindexd", user=USER)
    wait_status(machine, "s['indexed_files'] == 6 and not s['index_error']")
    assert "plan.md" in kbctl(machine, "search quarterly roadmap")

    # The configuration now needs TCP, and the unit still allows Unix sockets only.
    _use_backend(machine, TCP_DSN)
    machine.run("systemctl --user restart kbindexd", user=USER)
    wait_status(machine, "'sandbox forbids TCP' in s['index_error']")
    assert "kbctl service install" in status(machine)["index_error"]
    kbctl(machine, "service install")
    machine.run("systemctl --user restart kbindexd", user=USER)
    wait_status(machine, "s['indexed_files'] == 6 and not s['index_error']")
    assert "tmp.md" in kbctl(machine, "search tmproot")


def _use_backend(machine: nspawn.Machine, dsn: str) -> None:
    settings = f'backend = "postgres"\ndsn = "{dsn}"\n'
    # 0600: a config file holding a DSN with a password is refused when others can read it.
    machine.run(f"sed -i '/^backend\\|^dsn/d' {CONFIG} && cat - {CONFIG} > ~/c && mv ~/c {CONFIG}"
                f" && chmod 600 {CONFIG}", user=USER, stdin=settings)  # fmt: skip


def test_memory_max(machine: nspawn.Machine) -> None:
    cgroup = machine.run(
        "grep '^0::' /proc/$(systemctl --user show kbindexd -p MainPID --value)/cgroup"
        " | cut -d: -f3", user=USER).stdout.strip()  # fmt: skip
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        limit = machine.run(f"cat {mount}{cgroup}/memory.max", check=False)
        if limit.returncode == 0:
            assert limit.stdout.strip() == str(1 << 30)
            return
    controllers = machine.run("cat /sys/fs/cgroup/unified/cgroup.controllers"
                              " /sys/fs/cgroup/cgroup.controllers", check=False).stdout  # fmt: skip
    pytest.skip(
        "MemoryMax= cannot be observed: the memory controller is not on the cgroup v2 "
        f"hierarchy here (cgroup v2 controllers: {controllers.strip() or 'none'})"
    )
