"""Hostile greps: patterns built to be slow, huge or refused, and files ripgrep takes
for binary. Each answers within the grep deadline with a result or a clear
``bad_pattern`` naming the problem (and where ripgrep points, the position), and the
daemon keeps serving an ordinary grep afterwards.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
from conftest import Daemon, write
from grep_helpers import Case, grep, needs_rg
from kbindex.daemon.grep import grepper as grepping
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.grep.grepper import DEADLINE_SECONDS
from kbindex.daemon.index.values import Candidates
from kbindex.daemon.roots import Roots
from kbindex.proto import framing
from kbindex.proto.client import DaemonError
from kbindex.proto.messages import MAX_PATTERN_CHARS, ErrorCode, ErrorReply, GrepReply
from raw_socket import RawConnection

pytestmark = [pytest.mark.slow, pytest.mark.anyio, needs_rg]

ANSWER_SECONDS = DEADLINE_SECONDS + 5.0
"""The deadline, plus room for a loaded machine to start ripgrep and reply."""


async def _corpus(d: Daemon) -> None:
    # Input that makes a backtracking engine explode: long runs of "a" without the
    # "b" or end that a ReDoS pattern wants, and one long line of them.
    write(d.root / "runs.txt", ("a" * 30 + "\n") * 2000 + "a" * 5000 + "!\n")
    write(d.root / "plain.txt", "an ordinary needle\n")
    await d.refresh()


async def _still_serving(d: Daemon) -> None:
    reply = await grep(d, Case("needle"))
    assert [(Path(ln.path).name, ln.line) for ln in reply.lines] == [("plain.txt", 1)]


async def _answer(d: Daemon, case: Case) -> GrepReply | DaemonError:
    started = time.monotonic()
    try:
        result: GrepReply | DaemonError = await grep(d, case)
    except DaemonError as exc:
        result = exc
    assert time.monotonic() - started < ANSWER_SECONDS, case
    return result


@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        ("(a+)+$", 2000),
        ("(a|aa)*b", 0),
        ("(.*a){20}", 2001),
        ("(a*)*" * (MAX_PATTERN_CHARS // 5), 2002),
        ("(?:a|a?)+x", 0),
        ("a" * MAX_PATTERN_CHARS, 1),
        ("".join(f"(ab{i:03d}|cd{i:03d}" for i in range(80)) + ")" * 80, 0),
    ],
    ids=["nested-plus", "alternation-star", "counted-dot-star", "4KB-nested-stars", "optional",
         "4KB-literal", "nested-alternation"],
)  # fmt: skip
async def test_redos_classics_run_in_linear_time(daemon: Daemon, pattern: str, lines: int) -> None:
    await _corpus(daemon)
    reply = await _answer(daemon, Case(pattern))
    assert isinstance(reply, GrepReply) and reply.complete
    assert reply.total == lines
    await _still_serving(daemon)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("a{100000}{100000}", "exceeds size limit"),
        ("(" * MAX_PATTERN_CHARS, "unclosed group"),
        ("(" * 1000 + "needle" + ")" * 1000, "nested parentheses"),
        ("[" * MAX_PATTERN_CHARS, "unclosed character class"),
    ],
    ids=["huge-repetition", "4KB-open-groups", "deep-groups", "4KB-open-classes"],
)
async def test_huge_patterns_get_a_clear_error(daemon: Daemon, pattern: str, says: str) -> None:
    await _corpus(daemon)
    reply = await _answer(daemon, Case(pattern))
    assert isinstance(reply, DaemonError) and reply.code == ErrorCode.BAD_PATTERN, reply
    assert says in str(reply)
    await _still_serving(daemon)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "backreferences are not supported (at character 4 "),
        (r"zzqqzz(x)\1", "backreferences are not supported (at character 10 "),
        ("needle(?=s)", "look-around"),
        ("(?<=an )needle", "look-around"),
        ("zzqqzz(?!x)", "look-around"),
        (r"\xZZ", "invalid hexadecimal digit (at character 3 "),
        (r"\u{110000}", "not a Unicode scalar value"),
        (r"needle\q", "unrecognized escape sequence (at character 7 "),
        ("a{2,1}", "invalid repetition count range"),
        ("[z-a]", "invalid character class range"),
        (r"\p{Bogus}", "Unicode property not found"),
        ("needle\nzzqqzz", "the literal"),
    ],
)
async def test_refused_patterns_name_the_problem_and_where(
    daemon: Daemon, pattern: str, says: str
) -> None:
    # Patterns with "zzqqzz" have no candidate file: ripgrep is asked anyway, over
    # nothing, so the error is the same whether or not a file could match.
    await _corpus(daemon)
    reply = await _answer(daemon, Case(pattern))
    assert isinstance(reply, DaemonError) and reply.code == ErrorCode.BAD_PATTERN, reply
    assert says in str(reply)
    await _still_serving(daemon)


@pytest.mark.parametrize(
    ("case", "at"),
    [
        (Case("needle\0"), 7),
        (Case("\0"), 1),
        (Case("a\0b", fixed=True), 2),
        (Case("zzqqzz\0"), 7),
    ],
)
async def test_a_nul_in_the_pattern_is_refused_with_its_position(
    daemon: Daemon, case: Case, at: int
) -> None:
    # The protocol carries any string; a process's arguments cannot hold a NUL.
    await _corpus(daemon)
    reply = await _answer(daemon, case)
    assert isinstance(reply, DaemonError) and reply.code == ErrorCode.BAD_PATTERN, reply
    assert "NUL" in str(reply) and f"at character {at} " in str(reply)
    await _still_serving(daemon)


@pytest.mark.parametrize("raw", [b"\xff", b"needle\xed\xa0\x80", b"\xc3"])
async def test_a_pattern_that_is_not_utf8_gets_an_error_reply(daemon: Daemon, raw: bytes) -> None:
    """A msgpack string holding bytes that are not UTF-8 (a lone surrogate, a cut
    sequence): an invalid_argument reply on the same connection, which stays open."""
    await _corpus(daemon)
    body = msgspec.msgpack.encode({"op": "grep", "id": 7, "pattern": "PLACEHOLDER"})
    body = body.replace(b"\xabPLACEHOLDER", bytes([0xA0 | len(raw)]) + raw)
    with RawConnection(daemon.socket) as conn:
        conn.send_raw(framing.pack(body))
        reply = conn.recv()
        assert isinstance(reply, ErrorReply) and reply.id == 7, reply
        assert reply.code == ErrorCode.INVALID_ARGUMENT and "UTF-8" in reply.message
        conn.send({"op": "grep", "id": 8, "pattern": "needle"})
        again = conn.recv()
        assert isinstance(again, GrepReply) and again.total == 1
    await _still_serving(daemon)


async def test_a_file_ripgrep_finds_binary_gives_no_lines_and_spoils_no_other(
    daemon: Daemon,
) -> None:
    """A NUL past the 8 KiB the indexer samples: the file is indexed as text, and
    ripgrep, given it by name, prints "PATH: binary file matches (...)" instead of
    its lines (no NUL after the path). ``rg -uu`` prints nothing for it; the next
    file's lines keep their own path."""
    daemon.extra_args = ["--include-ext", "*"]
    daemon.stop()
    write(daemon.root / "a late nul.txt", b"needle early\n" + b"x" * 9000 + b"\n\0\nneedle\n")
    write(daemon.root / "b.txt", "one needle\nand a second needle\n")
    await daemon.start()
    reply = await grep(daemon, Case("needle"))
    assert [(ln.path, ln.line, ln.text) for ln in reply.lines] == [
        (str(daemon.root / "b.txt"), 1, "one needle"),
        (str(daemon.root / "b.txt"), 2, "and a second needle"),
    ]
    assert (reply.total, reply.files) == (2, 1)


FILLER = b"".join(b"filler line %d\n" % i for i in range(6000))
"""Past ripgrep's first 64 KiB: a NUL after it is found once the file has matched."""


async def test_a_nul_past_64_kib_counts_and_lists_only_the_lines_before_it(
    daemon: Daemon,
) -> None:
    """``rg -uu`` stops at the NUL: the lines before it are the file's answer, for the
    lines, the totals and ``-l``; named, ``--count`` and ``-l`` would search past it.
    For a pattern with trigrams and one without (a walk)."""
    daemon.extra_args = ["--include-ext", "*"]
    daemon.stop()
    write(daemon.root / "a.txt", "needle one\n")
    write(daemon.root / "b nul.txt", b"needle before\n" + FILLER + b"x\0y\nneedle after\n")
    write(daemon.root / "c nul.txt", b"nothing yet\n" + FILLER + b"x\0y\nneedle hidden\n")
    await daemon.start()
    for pattern in ("needle", "ne+d"):
        reply = await grep(daemon, Case(pattern))
        assert [(Path(ln.path).name, ln.line) for ln in reply.lines] == [
            ("a.txt", 1),
            ("b nul.txt", 1),
        ]
        assert (reply.total, reply.files) == (2, 2)
        listed = await grep(daemon, Case(pattern, files_only=True))
        assert [Path(ln.path).name for ln in listed.lines] == ["a.txt", "b nul.txt"]
        assert listed.total == 2


async def test_past_the_limit_a_file_with_a_nul_is_counted_by_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``limit`` later runs only count, unless a file with a NUL is among theirs.
    Runs of one file (the chunk sizes lowered: a run holds thousands of files), over
    real files with the real ripgrep; the third run starts once a line is kept."""
    files = {
        "a.txt": b"needle\n",
        "b.txt": b"needle\nneedle\n",
        "c nul.txt": b"needle before\n" + FILLER + b"x\0y\nneedle after\nneedle again\n",
    }
    for name, data in files.items():
        write(tmp_path / name, data)
    monkeypatch.setattr(grepping, "CHUNK_FILES", (1, 1))
    paths = {str(tmp_path / name): len(data) for name, data in files.items()}
    found = Candidates.of(paths, scanned_all=True, uncounted=[str(tmp_path / "c nul.txt")])
    outcome = await grepping.Grepper(Roots((tmp_path,))).run(ripgrep.Flags("needle"), found, 1)
    assert [(Path(ln.path).name, ln.line) for ln in outcome.lines] == [("a.txt", 1)]
    assert (outcome.total, outcome.files, outcome.truncated) == (4, 3, True)
