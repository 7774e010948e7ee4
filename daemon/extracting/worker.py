"""The worker process: reads documents sent on stdin, answers on stdout, under limits.

Started by ``workers`` as ``python -m kbindex.daemon.extracting.worker CPU MEMORY``. It
sets its own limits before it imports any reader: the address space (RLIMIT_AS) once,
and before each document a CPU-time limit (RLIMIT_CPU) that many seconds past what it
has used, so the kernel stops a reader that loops (SIGXCPU). Frames are a 4-byte
big-endian length and a msgpack ``Request`` or ``Reply``; a ``Request`` is followed by
the document's bytes, raw (``Request.size``). What a library prints goes nowhere: stdout
is the frames' alone.

``KBINDEX_EXTRACT_TEST_HOOK=1`` (tests only) makes a PDF holding ``%KBINDEX-TEST-LOOP``,
``-EAT``, ``-HANG`` or ``-CRASH`` loop, eat memory, sleep or abort: a real PDF that does
that to PDFium cannot be made on purpose, and the limits must be shown to hold. With it,
``KBINDEX_EXTRACT_TEST_LOG`` names a file that gets a line per document read, so a test
can count extractions.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import select
import sys
import time
from pathlib import Path
from typing import BinaryIO

import msgspec
from kbindex.daemon.extracting.results import (
    Failed,
    Outcome,
    Reason,
    Reply,
    Request,
    TooMuchText,
)

_HOOK = os.environ.get("KBINDEX_EXTRACT_TEST_HOOK") == "1"
IDLE_SECONDS = 30.0
IDLE_EXIT = 3
"""The status of a worker that ended for want of work: its memory goes back to the
system between bursts (``workers`` starts another, and sends it the document again)."""


def main(argv: list[str]) -> None:
    cpu_seconds, memory_bytes = float(argv[0]), int(argv[1])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # If memory runs out around it (the service's MemoryMax= counts workers too), the
    # kernel is to end the worker, not the daemon.
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    decoder = msgspec.msgpack.Decoder(Request)
    encoder = msgspec.msgpack.Encoder()
    source = sys.stdin.buffer
    while True:
        if not select.select([source], [], [], IDLE_SECONDS)[0]:
            sys.exit(IDLE_EXIT)
        header = _frame(source)
        if header is None:
            return
        request = decoder.decode(header)
        data = _exactly(source, request.size)
        if data is None:
            return
        _limit_cpu(cpu_seconds)
        outcome = _outcome(request, data, memory_bytes)
        data = encoder.encode(Reply.of(outcome))
        frames.write(len(data).to_bytes(4, "big") + data)
        frames.flush()


def _frame(source: BinaryIO) -> bytes | None:
    header = source.read(4)
    if len(header) < 4:
        return None
    return _exactly(source, int.from_bytes(header, "big"))


def _exactly(source: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes, or None when the daemon closed the pipe before sending them."""
    payload = source.read(size)
    return payload if len(payload) == size else None


def _limit_cpu(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))


def _outcome(request: Request, data: bytes, memory_bytes: int) -> Outcome:
    try:
        if _HOOK:
            _test_hook(data)
        return _read(request.kind, data, request.max_chars)
    except TooMuchText as exc:
        return Failed(Reason.OVER_LIMIT, f"output: {exc}")
    except MemoryError:
        return Failed(Reason.OVER_LIMIT, f"memory: over {memory_bytes >> 20} MiB")
    except RecursionError:
        return Failed(Reason.DAMAGED, "nested too deeply to read")
    except Exception as exc:  # a reader's bug or a file it cannot make sense of
        return Failed(Reason.DAMAGED, f"{type(exc).__name__}: {exc}"[:300])


def _read(kind: str, data: bytes, cap: int) -> Outcome:
    if kind == "pdf":
        from kbindex.daemon.extracting import pdf

        return pdf.read(data, cap)
    if kind in ("docx", "pptx", "xlsx"):
        from kbindex.daemon.extracting import office

        return office.read(kind, data, cap)
    if kind in ("odt", "ods", "odp"):
        from kbindex.daemon.extracting import opendocument

        return opendocument.read(kind, data, cap)
    if kind == "html":
        from kbindex.daemon.extracting import webpage

        return webpage.read(data, cap)
    if kind == "epub":
        from kbindex.daemon.extracting import epub

        return epub.read(data, cap)
    return Failed(Reason.DAMAGED, f"no reader for {kind}")


def _test_hook(data: bytes) -> None:
    log = os.environ.get("KBINDEX_EXTRACT_TEST_LOG")
    if log:
        with open(log, "a") as out:
            out.write(f"{len(data)}\n")
    head = data[:4096]
    if b"%KBINDEX-TEST-LOOP" in head:
        while True:
            pass
    if b"%KBINDEX-TEST-EAT" in head:
        hoard = []
        while True:
            hoard.append(bytearray(16 << 20))
    if b"%KBINDEX-TEST-HANG" in head:
        time.sleep(3600)
    if b"%KBINDEX-TEST-CRASH" in head:
        os.abort()


if __name__ == "__main__":
    main(sys.argv[1:])
