"""A team on one shared index (issue 39's target): two writers and a reader, each a
daemon of its own with its machine name, state directory and PostgreSQL role (the roles,
grants and row-level security of docs/postgres.md, run as they are), lose nothing of
each other's, and every daemon's answers say which machine is behind, then gone.

Once on one host as one user, once as three "machines": each daemon runs as a throwaway
uid of its own (no account; we run as root) with its folders its own, so the shared
database is the one door between them. A uid without an account cannot run the
interpreter under root's home (pyenv): those daemons, and the kbctl that asks them
(a client refuses a daemon of another user), run the system's python of the same
version with this environment's packages (``site.addsitedir``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Daemon, wait_for, write
from test_postgres import shared
from test_postgres_roles import GRANTS, ROW_SECURITY, migrate, run, sql_blocks, team

psycopg = pytest.importorskip("psycopg")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
__all__ = ["team"]  # the fixture, shared with the roles' tests

LEASE = 16.0
"""``--pg-lease``: a heartbeat every 2.7 s, behind after 8 s, gone after 16 s. Behind
lasts longer than a daemon keeps its count of other machines (5 s), so it is seen."""

WORDS = {
    "zebra": {"shared.md"},
    "ibis": {"changing.md"},
    "old": set(),
    "quokka": {"moved/moving.md"},
    "wombat": set(),
    "okapi": {"new.md"},
}
"""Each word, and the files holding it on both machines once everything changed."""

SITE = sysconfig.get_paths()["purelib"]
BOOT = (
    "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); del sys.argv[0];"
    " runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)
"""``python -c BOOT SITE MODULE ARGS...``: MODULE as ``-m`` would, with SITE's packages."""


def reachable_by_all(path: Path) -> bool:
    """Every folder on the way to ``path`` lets others through, and ``path`` is readable."""
    real = path.resolve()
    folders = [p for p in real.parents if p != Path("/")]
    return bool(real.stat().st_mode & 0o004) and all(p.stat().st_mode & 0o001 for p in folders)


def python_for_others() -> str | None:
    """An interpreter of this version that any uid can run, or None."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(f"python{version}", path="/usr/bin:/bin")
    for candidate in (sys.executable, system):
        if candidate and Path(candidate).exists() and reachable_by_all(Path(candidate)):
            return candidate
    return None


class UserDaemon(Daemon):
    """A kbindexd running as ``uid``; asked through kbctl running as ``uid`` too."""

    def __init__(self, base: Path, roots: list[Path], uid: int, python: str) -> None:
        super().__init__(base, base / "run", roots)
        self.uid = uid
        self.prefix = [
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            python, "-c", BOOT, SITE,
        ]  # fmt: skip
        self.extra_env = {"HOME": str(base)}

    def command(self, *extra: str) -> list[str]:
        return [*self.prefix, *super().command(*extra)[2:]]

    def kbctl(self, *args: str, cwd: Path | None = None) -> Any:
        return subprocess.run(
            [*self.prefix, "kbindex.ctl.main", "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=cwd,
            env={**os.environ, **self.extra_env},
        )


def ask(d: Daemon, *args: str) -> dict[str, Any]:
    done = d.kbctl(*args, "--json")
    assert done.returncode == 0, (done.stderr, d.log())
    return dict(json.loads(done.stdout))


@pytest.fixture(params=["one user", "three users"])
def users(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """Where the daemons' folders go, and what makes each daemon: as this user under
    ``tmp_path``, or as a throwaway uid of its own in a folder of its own."""
    if request.param == "one user":
        yield tmp_path, lambda name, dsn, *roots: shared(tmp_path, name, dsn, *roots)
        return
    python = python_for_others()
    if os.geteuid() != 0 or python is None or not reachable_by_all(Path(SITE)):
        pytest.skip("needs root, and an interpreter and packages other uids can reach")
    top = Path(tempfile.mkdtemp(prefix="kbteam-", dir="/tmp"))
    top.chmod(0o755)
    uids = iter(range(base := 200_000 + secrets.randbelow(700_000), base + 3))

    def make(name: str, dsn: str, *roots: Path) -> Daemon:
        uid = next(uids)
        home = top / name
        home.mkdir()
        for folder in (home, *roots):
            folder.mkdir(exist_ok=True)
            os.chown(folder, uid, uid)
        home.chmod(0o700)
        d = UserDaemon(home, list(roots), uid, python)
        d.backend_args = ("--backend", "postgres", "--dsn", dsn, "--machine", name)
        if not roots:
            d.extra_args = ["--no-roots"]
        return d

    try:
        yield top, make
    finally:
        shutil.rmtree(top, ignore_errors=True)


def machines_rows(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT machine, count(*) FROM kbindex.kb_files GROUP BY 1")
        return {str(m): int(n) for m, n in rows}


def found(d: Daemon, word: str) -> set[tuple[str, str]]:
    hits = ask(d, "search", "--limit", "50", word)["hits"]
    return {(h["machine"], h["relpath"]) for h in hits}


def states(d: Daemon) -> tuple[list[str], list[str]]:
    fresh = ask(d, "search", "zebra")["freshness"]
    return fresh["machines_behind"], fresh["machines_gone"]


async def started(d: Daemon) -> None:
    d.proc = d.spawn()

    async def scanned() -> bool:
        assert d.proc is not None and d.proc.poll() is None, d.log()
        done = d.kbctl("status", "--json")
        return done.returncode == 0 and json.loads(done.stdout).get("last_scan") is not None

    await wait_for(scanned, timeout=60, interval=0.5)
    if isinstance(d, UserDaemon) and d.proc is not None:  # its process, state, socket
        status = Path(f"/proc/{d.proc.pid}/status").read_text()
        assert f"\nUid:\t{d.uid}\t{d.uid}\t{d.uid}\t" in status
        assert d.state_dir.stat().st_uid == d.socket.parent.stat().st_uid == d.uid


async def reindexed(d: Daemon) -> None:
    done = await anyio.to_thread.run_sync(d.kbctl, "reindex", "--full", "--wait")
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(300)
async def test_two_writers_and_a_reader_lose_nothing_and_name_the_one_behind(
    team: dict[str, str], users: tuple[Path, Any]
) -> None:
    blocks = sql_blocks()
    made = migrate(team["kb_owner"])
    assert made.returncode == 0, made
    run(team["kb_owner"], blocks[GRANTS])
    for _ in range(2):  # the owner may run it again (after a migrate)
        run(team["kb_owner"], blocks[ROW_SECURITY])

    top, make = users
    roots = {name: top / name / "notes" for name in ("alpha", "beta")}
    writers = {name: make(name, team[name], root) for name, root in roots.items()}
    for name, root in roots.items():  # the same paths on both: rows keyed by machine
        write(root / "shared.md", f"# Shared\nkept by {name}, zebra\n")
        write(root / "changing.md", f"old words of {name}\n")
        write(root / "moving.md", f"moving words of {name}, quokka\n")
        write(root / "leaving.md", f"leaving words of {name}, wombat\n")
        write(root / f"{name}-only.md", f"only {name} has this yak\n")
    reader = make("searcher", team["searcher"])
    daemons = [*writers.values(), reader]
    for d in writers.values():  # the reader keeps its default: each row says its lease
        d.extra_args += ["--pg-lease", str(LEASE)]
    try:
        for d in daemons:
            await started(d)
        for d in daemons:
            assert found(d, "yak") == {("alpha", "alpha-only.md"), ("beta", "beta-only.md")}

        # Written, changed, renamed and deleted under both roots; both writers scan in
        # full at the same time, twice: neither scan touches the other's rows.
        for name, root in roots.items():
            write(root / "changing.md", f"new words of {name}, ibis\n")
            (root / "moved").mkdir()
            (root / "moving.md").rename(root / "moved" / "moving.md")
            (root / "leaving.md").unlink()
            write(root / "new.md", f"fresh words of {name}, okapi\n")
        for _ in range(2):
            async with anyio.create_task_group() as tg:
                for w in writers.values():
                    tg.start_soon(reindexed, w)
        for d in daemons:
            for word, paths in WORDS.items():
                want = {(m, p) for m in roots for p in paths}
                assert found(d, word) == want, (d.base.name, word)
        assert machines_rows(team["postgres"]) == {"alpha": 5, "beta": 5}

        # beta's daemon freezes: the others' answers name it behind, then gone, and
        # still serve its rows.
        others = {"alpha": writers["alpha"], "searcher": reader}

        async def settled() -> bool:
            return all(states(d) == ([], []) for d in others.values())

        await wait_for(settled, timeout=30, interval=0.5)
        beta = writers["beta"]
        assert beta.proc is not None
        beta.proc.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        seen: dict[str, list[tuple[list[str], list[str]]]] = {name: [] for name in others}
        try:
            while time.monotonic() - frozen < LEASE + 30:
                for name, d in others.items():
                    now = states(d)
                    if not seen[name] or seen[name][-1] != now:
                        seen[name].append(now)
                if all(log[-1] == ([], ["beta"]) for log in seen.values()):
                    break
                await anyio.sleep(0.3)
            for log in seen.values():
                assert log == [([], []), (["beta"], []), ([], ["beta"])], seen
            assert time.monotonic() - frozen >= LEASE / 2
            for d in others.values():
                assert ("beta", "beta-only.md") in found(d, "yak")
        finally:
            beta.proc.send_signal(signal.SIGCONT)
        await wait_for(settled, timeout=30, interval=0.5)  # awake, it renews its lease
    finally:
        for d in daemons:
            d.stop()
