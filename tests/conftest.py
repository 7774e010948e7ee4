"""Fixtures that run a real kbindexd on a real Unix socket over real files.

Sockets live under a short ``/tmp`` directory (Unix socket paths are limited to ~108
bytes, and pytest's tmp_path can be longer). Waiting is always on a condition with a
deadline, never a bare sleep.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from kbindex.daemon.backends.sqlite.index import SqliteIndex as Store
from kbindex.daemon.grep.ripgrep import RIPGREP_ENV
from kbindex.daemon.health import Health
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.index.interface import Texts as Texts
from kbindex.daemon.index.values import Seen, Update
from kbindex.daemon.indexing.documents import Renaming, prepare
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.indexing.kinds import Classifier
from kbindex.daemon.indexing.textfile import Loaded, decode
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.texts import Texts as Reader
from kbindex.proto.client import Client, ClientError

T = TypeVar("T")
MakeDaemon = Callable[..., "Daemon"]
START_TIMEOUT = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 10.0, interval: float = 0.02
) -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while True:
            value = await probe()
            if value:
                return value
            await anyio.sleep(interval)


class Daemon:
    """A kbindexd subprocess with its own roots, state directory and socket."""

    def __init__(self, base: Path, sockdir: Path, roots: list[Path]) -> None:
        self.base = base
        self.roots = roots
        self.state_dir = base / "state"
        self.socket = sockdir / "kb.sock"
        self.log_path = base / "kbindexd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []
        self.extra_env: dict[str, str] = {}
        self.backend_args: tuple[str, ...] = ()
        """The index backend's flags (``backend`` fixture); none: SQLite."""

    @property
    def root(self) -> Path:
        return self.roots[0]

    @property
    def db_path(self) -> Path:
        return self.state_dir / "index.sqlite3"

    def command(self, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "kbindex.daemon.app",
            *(str(r) for r in self.roots),
            "--state-dir", str(self.state_dir),
            "--socket", str(self.socket),
            "--scan-interval", "3600",
            "--log-level", "debug",
            *self.backend_args,
            *self.extra_args,
            *extra,
        ]  # fmt: skip

    def spawn(self, *extra: str) -> subprocess.Popen[bytes]:
        # KBINDEX_RG stays: the grep tests compare the daemon with the ripgrep it runs.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KBINDEX_")}
        if RIPGREP_ENV in os.environ:
            env[RIPGREP_ENV] = os.environ[RIPGREP_ENV]
        env["XDG_CONFIG_HOME"] = str(self.base / "config")
        # Search by meaning changes what ``auto`` answers (nearest passages even where
        # no word matches): on only in the tests about it (``extra_env``).
        env["KBINDEX_SEMANTIC"] = "off"
        env.update(self.extra_env)
        with self.log_path.open("ab") as log:  # the child keeps its own copy of the fd
            return subprocess.Popen(self.command(*extra), stdout=log, stderr=log, env=env)

    async def start(self, *extra: str, wait_scan: bool = True) -> None:
        self.proc = self.spawn(*extra)

        async def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"kbindexd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                async with self.client() as c:
                    status = await c.status()
                    return not wait_scan or (status.last_scan_at is not None)
            except ClientError:
                return False

        await wait_for(ready, timeout=START_TIMEOUT)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        async with Client.connect(self.socket, client_name="tests") as c:
            yield c

    async def refresh(self, *paths: str, full: bool = False) -> None:
        async with self.client() as c:
            async for _ in c.refresh_wait(list(paths), full=full):
                pass

    async def search_paths(self, query: str, **kwargs: object) -> list[str]:
        async with self.client() as c:
            reply = await c.search(query, **kwargs)  # type: ignore[arg-type]
            return [h.relpath for h in reply.hits]

    def kbctl(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=cwd,
        )


@pytest.fixture
def sockdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kbt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Backend:
    """The index backend a test's daemons use, and how to reach it."""

    name: str
    args: tuple[str, ...] = ()
    dsn: str = ""
    machine: str = ""


BACKENDS = ("sqlite", "postgres")
MACHINE = "testbox"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``backends`` runs once on each index backend (one suite, not a copy):
    its daemons get the backend's flags through ``make_daemon``."""
    if metafunc.definition.get_closest_marker("backends") and "backend" in metafunc.fixturenames:
        params = [
            pytest.param(name, marks=[pytest.mark.slow] * (name != "sqlite")) for name in BACKENDS
        ]
        metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    """SQLite, unless the test is marked ``backends``; PostgreSQL is a fresh database of
    the session's throwaway server (skipped with the reason where it is missing)."""
    name = getattr(request, "param", "sqlite")
    if name == "sqlite":
        return Backend(name)
    dsn = request.getfixturevalue("pg_index_dsn")
    args = ("--backend", "postgres", "--dsn", dsn, "--machine", MACHINE)
    return Backend(name, args, dsn, MACHINE)


@pytest.fixture
def make_daemon(tmp_path: Path, sockdir: Path, backend: Backend) -> Iterator[Callable[..., Daemon]]:
    """Make (not start) daemons; every one made is stopped at teardown."""
    made: list[Daemon] = []

    def make(*roots: Path) -> Daemon:
        if not roots:
            default = tmp_path / "root"
            default.mkdir(exist_ok=True)
            roots = (default,)
        d = Daemon(tmp_path, sockdir, list(roots))
        d.backend_args = backend.args
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()


@pytest.fixture
async def daemon(make_daemon: Callable[..., Daemon]) -> AsyncIterator[Daemon]:
    """A running daemon over an empty root (tests write files, then refresh)."""
    d = make_daemon()
    await d.start()
    yield d
    d.stop()


def with_writable_root(make_daemon: MakeDaemon, base: Path, *extra: str) -> Daemon:
    """A daemon (not started) over a writable root ``notes`` (``roots[0]``) and a
    read-only one ``docs`` (``roots[1]``, holding ``manual.md``), made writable the way a
    user does it: ``[root."..."] writable = true`` in its config file."""
    writable, readonly = base / "notes", base / "docs"
    writable.mkdir()
    write(readonly / "manual.md", "# Manual\nread only text\n")
    config = base / "config.toml"
    config.write_text(f'[root."{writable}"]\nwritable = true\n')
    d = make_daemon(writable, readonly)
    d.extra_args = ["--config", str(config), *extra]
    return d


def note(name: str, text: str, root: Path | None = None) -> Update:
    """The file ``name`` under the root ``/r``, as a scan sees it and reading it gives:
    what ``Store.apply`` takes (the document prepared, as the indexer hands it), without
    a file on disk. Under ``root`` instead, the file
    is written there too: for what reads the files (a hit's snippet, a move)."""
    where = "/r" if root is None else str(root)
    if root is not None:
        write(root / name, text)
    seen = Seen(path=f"{where}/{name}", root=where, size=len(text), mtime_ns=1)
    given = decode(text.encode(), len(text), 1)
    doc = prepare(seen.relpath, given) if isinstance(given, Loaded) else given
    return Update(seen, doc, Classifier().of(where, name))


def reading(*roots: Path) -> Texts:
    """What an index that keeps no text reads files through (``index.Texts``): the
    files under ``roots``, as the daemon gives it."""
    return Reader(Roots(roots)).current


def renaming(*roots: Path) -> Renaming:
    """What a move is given (``index.Renamer``), as the indexer gives it: files read
    again under ``roots``."""
    return Renaming(Classifier(), Roots(roots).inside)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A real index in a temporary directory, open for writing and reading; the files
    it shows text of lie under ``tmp_path``."""
    s = Store(tmp_path / "index.sqlite3", reading(tmp_path))
    s.open()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def indexer(tmp_path: Path) -> Iterator[Indexer]:
    """A real indexer (no daemon) writing a real index of the root ``tmp_path/root``
    (which the test fills), every file included, the size cap 1 MiB."""
    roots = Roots([tmp_path / "root"])
    index = Store(tmp_path / "index.sqlite3", reading(*roots.paths))
    index.open()
    rules = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    try:
        yield Indexer(index, roots, rules, Health(), 1 << 20, commits=Commits())
    finally:
        index.close()


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def bump_mtime(path: Path) -> None:
    """Move a file's mtime forward, as an edit a second later would."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def wait_exit(proc: subprocess.Popen[bytes], timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is not None, "process did not exit in time"
    return proc.returncode


# Runs before the daemon: as root, drop the capabilities that bypass file modes (and
# optionally lower the open-file limit), then exec the real command.
LAUNCHER = """
import ctypes, os, resource, sys
nofile = int(sys.argv[1])
if nofile:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
os.execv(sys.argv[2], sys.argv[2:])
"""


class ModeBoundDaemon(Daemon):
    """A daemon subject to file modes even when the tests run as root."""

    nofile = 0

    def command(self, *extra: str) -> list[str]:
        return [sys.executable, "-c", LAUNCHER, str(self.nofile), *super().command(*extra)]


def mode_bound(make_daemon: MakeDaemon, *roots: Path, nofile: int = 0) -> ModeBoundDaemon:
    d = make_daemon(*roots)
    d.__class__ = ModeBoundDaemon
    assert isinstance(d, ModeBoundDaemon)
    d.nofile = nofile
    return d


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MB tmpfs for the state directory. Mounting needs root with
    CAP_SYS_ADMIN (CI here has it); elsewhere the test is skipped with the reason."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throwaway PostgreSQL cluster for the session (``tests/pgserver.py``), stopped at
    the end whatever happened. Skips where PostgreSQL or psycopg is not installed."""
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")
    import pgserver

    bindir = pgserver.find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl not found (Debian: apt install postgresql)")
    server = pgserver.started(bindir)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_dsn(pg_server: Any) -> Iterator[str]:
    """A ``postgresql://`` DSN (Unix socket) of a fresh, empty database, dropped after the
    test. Restart the server with ``pg_server.restart()``."""
    name = pg_server.create_database()
    yield pg_server.dsn(name)
    pg_server.drop_database(name)


@pytest.fixture
def pg_index_dsn(pg_dsn: str) -> str:
    """``pg_dsn`` with the shared index's schema made, as its owner would with ``kbindexd
    db migrate`` (the server's superuser here), and sessions searching that schema, so
    that a test's own SQL names its tables as the daemon does."""
    import psycopg
    from kbindex.daemon.backends.postgres import schema

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema.migrate(conn)
    return f"{pg_dsn}&options=-csearch_path%3D{schema.NAMESPACE}"
