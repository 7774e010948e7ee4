"""A loopback TCP proxy in front of the test server's Unix socket, which a test can
pause (it keeps every connection open and passes nothing: a stalled NAT, proxy or VM,
whose kernel still acknowledges keepalives), cut (it closes every connection) and
resume. The real network faults, made on this host without root's firewall rules."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from pathlib import Path


class PgProxy:
    def __init__(self, upstream: Path, host: str = "127.0.0.1") -> None:
        self.upstream = str(upstream)
        self._listener = socket.create_server((host, 0))
        self.host, self.port = self._listener.getsockname()[:2]
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, dbname: str, user: str = "postgres", extra: str = "") -> str:
        return f"postgresql://{user}@{self.host}:{self.port}/{dbname}{extra}"

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def cut(self) -> None:
        """Close every connection open now (new ones are accepted)."""
        with self._lock:
            sockets, self._open = self._open, []
        for s in sockets:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.resume()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                server.connect(self.upstream)
            except OSError:
                client.close()
                server.close()
                continue
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()  # paused: the bytes wait here, the sockets stay open
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
