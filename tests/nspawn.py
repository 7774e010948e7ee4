"""A throwaway machine with a real systemd for the service tests: this machine's own root
file system booted in a ``systemd-nspawn`` container.

The root is bind-mounted to a folder under /tmp (nspawn refuses ``--directory=/``) and
booted with ``--volatile=overlay``: every write inside lands in a tmpfs that goes with
the container, so the host's files stay as they were. ``--private-network`` gives the
container a loopback of its own (a PostgreSQL server in it listens on no port of the
host's); ``--keep-unit`` and ``--register=no`` let nspawn run where the host has no
systemd. Commands run inside through ``nsenter`` into the container's init.

Another systemd version (Debian's backports carry 254) is installed into an overlay of
the root before the boot, from the ``.deb`` files in a folder (``.ci/run`` downloads
them): the host keeps its own version. Everything here needs root; ``unavailable()``
says why a container cannot be started, for the test to skip with.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

BOOT_SECONDS = 60.0
DEBS_ENV = "KBINDEX_SYSTEMD_DEBS"
"""A folder of systemd ``.deb`` files to boot with instead of the host's systemd."""


class BootFailed(Exception):
    """The container did not reach a running system: the message says what it printed."""


def unavailable() -> str | None:
    """Why no container can be booted here, or None."""
    if os.geteuid() != 0:
        return "booting a container needs root"
    for tool in ("systemd-nspawn", "nsenter", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt install systemd-container util-linux)"
    if not Path("/lib/systemd/systemd").exists():
        return "systemd is not installed (apt install systemd)"
    for package, pattern in (
        ("dbus-user-session", "lib/systemd/user/dbus.socket"),
        ("libpam-systemd", "lib/*/security/pam_systemd.so"),
    ):
        if not list(Path("/usr").glob(pattern)):
            return f"{package} is not installed"
    return None


class Machine:
    """One booted container; ``run`` executes a shell command in it, as root or a user."""

    def __init__(
        self,
        name: str,
        debs: Path | None = None,
        binds: dict[str, Path] | None = None,
        binds_rw: dict[str, Path] | None = None,
    ) -> None:
        self.name = name
        self.debs = debs
        self.binds = binds or {}
        """Folders of the host shown read-only in the container: {where inside: host path}."""
        self.binds_rw = binds_rw or {}
        """... and writable."""
        self.base = Path(tempfile.mkdtemp(prefix=f"kbns-{name}-", dir="/tmp"))
        self.lower = self.base / "lower"
        self.root = self.lower
        self.log = self.base / "nspawn.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.leader = 0
        self._mounts: list[Path] = []

    # ------------------------------------------------------------ life

    def boot(self) -> None:
        self.lower.mkdir()
        self._mount(["--bind", "/", str(self.lower)], self.lower)
        args = ["--volatile=overlay"]
        if self.debs is not None:
            self.root = self._upgraded(self.debs)
            args = []  # the overlay that holds the upgrade is thrown away already
        args += [f"--bind-ro={host}:{inside}" for inside, host in self.binds.items()]
        args += [f"--bind={host}:{inside}" for inside, host in self.binds_rw.items()]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    "systemd-nspawn", "--quiet", "-D", str(self.root), *args,
                    "--private-network", "--register=no", "--keep-unit",
                    f"--machine={self.name}", "--console=passive", "--boot",
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + BOOT_SECONDS
        state = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BootFailed(f"systemd-nspawn exited {self.proc.returncode}: {self._said()}")
            self.leader = self.leader or self._find_leader()
            if self.leader:
                state = self.run("systemctl is-system-running", check=False).stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.2)
        raise BootFailed(f"not running after {BOOT_SECONDS:.0f} s ({state!r}): {self._said()}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # nspawn asks the container's init to power off
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for mount in reversed(self._mounts):
            subprocess.run(["umount", "--lazy", str(mount)], check=False, capture_output=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.base)

    def _mount(self, args: list[str], where: Path) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True)
        self._mounts.append(where)

    def _upgraded(self, debs: Path) -> Path:
        """A root with ``debs`` installed: an overlay on a tmpfs over the bind mount."""
        layer = self.base / "layer"
        layer.mkdir()
        self._mount(["-t", "tmpfs", "tmpfs", str(layer)], layer)
        for name in ("upper", "work", "root"):
            (layer / name).mkdir()
        root = layer / "root"
        options = f"lowerdir={self.lower},upperdir={layer / 'upper'},workdir={layer / 'work'}"
        self._mount(["-t", "overlay", "overlay", "-o", options, str(root)], root)
        # Not with apt: its own lists are not needed, and dpkg alone takes the files as
        # given; --auto-deconfigure lets systemd-dev in before the systemd that needs it.
        install = subprocess.run(
            [
                "systemd-nspawn", "--quiet", "-D", str(root), "--private-network",
                "--register=no", "--keep-unit", f"--bind-ro={debs}:/debs", "--pipe",
                "sh", "-c", "dpkg -i --auto-deconfigure /debs/*.deb",
            ],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if install.returncode != 0:
            raise BootFailed(f"installing {debs} failed: {install.stdout[-2000:]}")
        return root

    def _find_leader(self) -> int:
        """The container's init: the one child of systemd-nspawn."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        with contextlib.suppress(OSError, ValueError):
            pids = children.read_text().split()
            if pids:
                return int(pids[0])
        return 0

    def _said(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-2000:]
        return ""

    # ------------------------------------------------------------ commands

    def run(
        self,
        command: str,
        *,
        user: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``sh -c command`` in the container; as ``user`` with that user's manager
        reachable (XDG_RUNTIME_DIR, the session bus) and a clean environment."""
        argv = ["nsenter", "-t", str(self.leader), "-a"]
        if user is None:
            argv += ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
        else:
            uid = self.uid(user)
            argv += [
                "runuser", "-u", user, "--", "env", "-i",
                f"HOME=/home/{user}", f"USER={user}", f"LOGNAME={user}",
                "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                f"XDG_RUNTIME_DIR=/run/user/{uid}",
                f"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/{uid}/bus",
            ]  # fmt: skip
        argv += ["sh", "-c", command]
        result = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            who = user or "root"
            raise AssertionError(
                f"in {self.name} as {who}: {command}\nexit {result.returncode}\n"
                f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}\n"
                f"the container's journal, last lines:\n{self._journal()}"
            )
        return result

    def _journal(self) -> str:
        """The container's last journal lines: why a service failed, in a CI log."""
        argv = ["nsenter", "-t", str(self.leader), "-a", "journalctl", "--no-pager", "-n", "40"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"(journalctl: {exc})"
        return done.stdout[-6000:]

    def uid(self, user: str) -> int:
        return int(self.run(f"id -u {shlex.quote(user)}").stdout)

    def wait(self, command: str, *, user: str | None = None, timeout: float = 30.0) -> str:
        """Run ``command`` until it succeeds; its output. Fails after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.run(command, user=user, check=False)
            if result.returncode == 0:
                return result.stdout
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"in {self.name}: {command} did not succeed within {timeout:.0f} s\n"
                    f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
                )
            time.sleep(0.3)
