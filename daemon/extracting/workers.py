"""Worker processes seen from the daemon: start, send a document, wait within a deadline,
and end the worker when anything goes wrong with it.

A worker reads one document at a time; the caller that holds it is its only user. Idle
workers are kept (a few) so that a scan of many documents does not pay a Python start
and the readers' imports per document; a worker that failed a document, or has read
many, is ended, so nothing a hostile file did to it lasts. A caller finds an idle
worker or starts its own: a read_file never waits behind the indexer's extraction.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Final

import msgspec
from kbindex.daemon.extracting.results import Failed, Outcome, Reason, Reply, Request
from kbindex.daemon.extracting.worker import IDLE_EXIT

IDLE_WORKERS: Final = 2
JOBS_PER_WORKER: Final = 200


@dataclass(frozen=True, slots=True)
class Limits:
    cpu_seconds: float
    memory_bytes: int
    wall_seconds: float
    max_chars: int


class Stale(Exception):
    """The worker had ended for want of work (``worker.IDLE_EXIT``) before it was sent
    the document: nothing to do with the document."""


class _Ended(Exception):
    def __init__(self, failed: Failed) -> None:
        super().__init__(failed.detail)
        self.failed = failed


class Worker:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.jobs = 0
        self.killed = False
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kbindex.daemon.extracting.worker",
                str(limits.cpu_seconds),
                str(limits.memory_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )

    def run(self, kind: str, data: bytes) -> Outcome:
        """``data`` read as ``kind``; a Failed outcome ends the worker (``alive``)."""
        self.jobs += 1
        deadline = time.monotonic() + self.limits.wall_seconds
        header = msgspec.msgpack.encode(Request(kind, self.limits.max_chars, len(data)))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(len(header).to_bytes(4, "big") + header)
            # A write of its own: a document of many MB is never copied into a frame.
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            outcome = msgspec.msgpack.decode(self._receive(deadline), type=Reply).outcome
        except _Ended as ended:
            self.close()
            return ended.failed
        except (OSError, msgspec.DecodeError):
            self.close()
            return self._death()
        if isinstance(outcome, Failed):
            self.close()
        return outcome

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the process (from another thread: its user sees it die)."""
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _receive(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        cap = 4 * self.limits.max_chars + 4096  # UTF-8 takes at most 4 bytes a character
        buffer = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Ended(
                        Failed(Reason.OVER_LIMIT, f"time: over {self.limits.wall_seconds:g} s")
                    )
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise _Ended(self._death())
                buffer += chunk
                if len(buffer) >= 4:
                    size = int.from_bytes(buffer[:4], "big")
                    if size > cap:
                        raise _Ended(Failed(Reason.OVER_LIMIT, f"output: {size:,} bytes"))
                    if len(buffer) >= 4 + size:
                        return bytes(buffer[4 : 4 + size])

    def _death(self) -> Failed:
        """Why the worker ended without an answer."""
        code = self.proc.wait()
        if code == IDLE_EXIT and not self.killed:
            raise Stale
        if code == -signal.SIGXCPU:
            return Failed(Reason.OVER_LIMIT, f"CPU time: over {self.limits.cpu_seconds:g} s")
        if code < 0:
            name = signal.Signals(-code).name
            if code == -signal.SIGKILL and not self.killed:
                name += ", perhaps by the kernel for want of memory"
            return Failed(Reason.CRASHED, f"the reader was killed by {name}")
        return Failed(Reason.CRASHED, f"the reader exited with status {code}")


class Workers:
    """Workers for any thread that extracts; at most IDLE_WORKERS wait between jobs."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False

    def run(self, kind: str, data: bytes) -> Outcome:
        """Raises OSError when no worker can be started, or when ``close`` ended the
        worker: the caller tries again later, nothing is wrong with the file."""
        while True:
            with self._lock:
                if self._closed:
                    raise OSError("the daemon is stopping")
                worker = self._idle.pop() if self._idle else None
                if worker is None or not worker.alive:
                    worker = Worker(self.limits)
                self._busy.add(worker)
            try:
                outcome = worker.run(kind, data)
            except Stale:
                worker.close()
                continue
            finally:
                with self._lock:
                    self._busy.discard(worker)
                    closed = self._closed
            break
        if closed:
            worker.close()
            raise OSError("the daemon is stopping")
        if not worker.alive:
            return outcome
        with self._lock:
            keep = (
                worker.jobs < JOBS_PER_WORKER
                and len(self._idle) < IDLE_WORKERS
                and worker.limits == self.limits
            )
            if keep and not self._closed:
                self._idle.append(worker)
                return outcome
        worker.close()
        return outcome

    def configure(self, limits: Limits) -> None:
        """Later documents are read under ``limits``; the idle workers, started under
        the old ones, end (a busy one ends when its document is read)."""
        with self._lock:
            self.limits = limits
            ending, self._idle = self._idle, []
        for worker in ending:
            worker.close()

    def close(self) -> None:
        """End every worker, busy ones too: a shutdown does not wait for a document."""
        with self._lock:
            self._closed = True
            ending, self._idle = [*self._idle, *self._busy], []
        for worker in ending:
            worker.kill()
