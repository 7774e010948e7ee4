"""A throwaway PostgreSQL cluster for the tests: initdb into a temporary folder, a server
on a Unix socket only, one fresh database per test.

The binaries come from ``pg_config --bindir`` or the newest ``/usr/lib/postgresql/*/bin``
(Debian keeps them off PATH). PostgreSQL refuses to run as root, and CI runs as root: then
initdb and pg_ctl run as the unprivileged ``postgres`` account Debian's package creates,
and the folder is handed to it. The folder is a short one under /tmp because a socket's
path is limited to ~108 bytes, and it must be reachable by that account (pytest's own
tmp_path is private to the user running the tests).

Durability is off (fsync, synchronous_commit, full_page_writes): a test cluster that a
crash loses is simply made again, and the tests run several times faster.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

SERVER_ACCOUNT = "postgres"
SUPERUSER = "postgres"
PORT = 5432  # only names the socket file: the server listens on no TCP port
SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl, or None where PostgreSQL is not installed."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        # pg_config may come from libpq-dev alone (no server): only a hint.
        run = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if run.returncode == 0 and run.stdout.strip():
            candidates.append(Path(run.stdout.strip()))
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(debian, key=lambda p: _version(p.parent.name), reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


class PgServer:
    """One cluster: ``start``, ``restart`` and ``stop`` it, ``create_database`` in it."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="kbpg-", dir="/tmp"))
        self.data = self.base / "data"
        self.sockdir = self.base  # short: /tmp/kbpg-XXXXXXXX/.s.PGSQL.5432
        self.log_path = self.base / "server.log"
        self._numbers = itertools.count(1)
        self._account: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._account = pwd.getpwnam(SERVER_ACCOUNT)
            except KeyError:
                raise RuntimeError(
                    f"running as root, and PostgreSQL refuses to: the unprivileged"
                    f" {SERVER_ACCOUNT!r} account (Debian's postgresql package) is missing"
                ) from None
            os.chown(self.base, self._account.pw_uid, self._account.pw_gid)
            # root reaches the socket anyway; the bits let other users in as well
            self.base.chmod(0o755)

    def _run(self, tool: str, *args: str) -> None:
        kwargs: dict[str, Any] = {}
        if self._account is not None:
            kwargs = {
                "user": self._account.pw_uid,
                "group": self._account.pw_gid,
                "extra_groups": [],
            }
        run = subprocess.run(
            [str(self.bindir / tool), *args],
            cwd=self.base,  # the server account must be able to enter the working folder
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            **kwargs,
        )
        if run.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(args)} failed ({run.returncode}):\n{run.stdout}{run.stderr}"
                f"\n{self.log()}"
            )

    def init(self) -> None:
        self._run(
            "initdb", "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
            "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        lines = [f"{k} = {v}" for k, v in SETTINGS.items()]
        lines.append(f"unix_socket_directories = '{self.sockdir}'")
        lines.append(f"port = {PORT}")
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# tests/pgserver.py\n" + "\n".join(lines) + "\n")

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "60", "start"
        )

    def stop(self) -> None:
        """Fast shutdown: open connections are cut, as when a server goes away."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """Stop and start again: every open connection is lost, new ones work."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server if it runs and remove the folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def dsn(self, dbname: str) -> str:
        return f"postgresql:///{dbname}?host={self.sockdir}&port={PORT}&user={SUPERUSER}"

    def create_database(self) -> str:
        """A new empty database (``kbtest_N``); its name."""
        name = f"kbtest_{next(self._numbers)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        """Drop it even if a test left connections open (FORCE ends them)."""
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def started(bindir: Path) -> PgServer:
    """A new cluster, initialised and running; ``close`` it when done."""
    server = PgServer(bindir)
    try:
        server.init()
        server.start()
    except BaseException:
        server.close()
        raise
    return server
