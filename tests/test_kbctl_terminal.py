"""kbctl on a terminal shows control characters from files and their names escaped, as
``ls`` and ``git`` do; piped, its grep output is still ``rg``'s, byte for byte.

A file's text and name are anyone's who can write in a root: an OSC sequence retitles
the terminal, ``ESC [2J`` clears it, a C1 CSI starts a sequence on terminals that take
one, a right-to-left override redraws the rest of the line backwards. kbctl runs here
on a real pseudo-terminal (its stdout and stderr are the pty), against a real daemon
whose writable root's own name holds a control sequence, so every path shows it.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MakeDaemon, write
from grep_helpers import RG, needs_rg

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
BIDI = "\u202e"
CSI = "\x9b"
TEXT = (
    "# Hostile\n\n"
    f"hostile {TITLE} retitles the terminal\n"
    f"hostile {CLEAR} clears the screen\n"
    f"hostile {BIDI}gnp.exe reads backwards\n"
    f"hostile {CSI}31m in red\n"
    "plain words to keep the share of control bytes low, as a text file has\n"
)
GREP = ("grep", "hostile")
OURS = ("\x1b[1m", "\x1b[0m")  # kbctl's own bold for matches


def on_terminal(socket: Path, *args: str, cwd: Path, stdin: bytes = b"") -> tuple[int, str]:
    """kbctl with a pseudo-terminal as its stdout and stderr: its status and what the
    terminal received (the line discipline's CR LF as LF)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(socket), *args],
        stdin=subprocess.PIPE,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
    )
    os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    received = bytearray()
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: every writer of the pty is gone
            break
        if not chunk:
            break
        received += chunk
    code = proc.wait(timeout=30)
    os.close(master)
    return code, received.decode().replace("\r\n", "\n")


def assert_escaped(shown: str) -> None:
    for ours in OURS:
        shown = shown.replace(ours, "")
    for raw in ("\x1b", "\x07", BIDI, CSI, "\r"):
        assert raw not in shown, (raw, shown)


@needs_rg
async def test_every_command_on_a_terminal_shows_control_characters_escaped(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    base = tmp_path / "notes\x1b[2J"  # the root's own name clears the screen
    root = base / "kb"
    hostile = write(root / f"title{TITLE}.md", TEXT)
    config = tmp_path / "config.toml"
    config.write_text(f"[root.{json.dumps(str(root))}]\nwritable = true\n")
    daemon = make_daemon(root)
    daemon.extra_args = ["--config", str(config)]
    await daemon.start()
    commands: list[tuple[list[str], bytes]] = [
        (["search", "hostile"], b""),
        (["grep", "hostile"], b""),
        (["grep", "-l", "hostile"], b""),
        (["grep", "-C", "1", "retitles"], b""),
        (["read", hostile.name], b""),
        (["files"], b""),
        (["why", hostile.name], b""),
        (["status"], b""),
        (["roots"], b""),
        (["note", "write", "new.md"], b"a new note\n"),
        (["note", "append", "new.md"], b"more\n"),
        (["read", f"missing{TITLE}.md"], b""),  # a refusal quoting the path, on stderr
        (["search", "--json", "hostile"], b""),
        (["grep", "--json", "hostile"], b""),
    ]
    for args, stdin in commands:
        code, shown = on_terminal(daemon.socket, *args, cwd=root, stdin=stdin)
        assert code == (1 if "missing" in args[-1] else 0), (args, shown)
        assert_escaped(shown)
        if "missing" in args[-1]:
            assert "missing\\x1b]0;pwned\\x07.md" in shown, shown
            continue
        if "--json" in args:
            assert "\\u001b" in shown, (args, shown)  # JSON's own escape
            assert args[0] == "search" or "\\u202e" in shown, (args, shown)
            continue
        assert "\\x1b[2J" in shown, (args, shown)  # the root's name, escaped
        if args[0] in ("search", "grep", "files", "why"):
            assert "title\\x1b]0;pwned\\x07.md" in shown, (args, shown)
    _, text = on_terminal(daemon.socket, "read", hostile.name, cwd=root)
    assert "hostile \\x1b]0;pwned\\x07 retitles" in text
    assert "hostile \\u202egnp.exe reads" in text
    assert "hostile \\u009b31m in red" in text
    assert text.count("\n") >= TEXT.count("\n")  # a file's lines stay lines

    # Piped, the bytes are the file's own: rg's output, byte for byte.
    assert RG is not None
    piped = subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *GREP],
        capture_output=True,
        cwd=root,
        timeout=30,
        check=True,
    )
    rg = subprocess.run(
        [RG, "-uu", "--no-heading", "--line-number", "--sort", "path", "hostile"],
        capture_output=True,
        cwd=root,
        timeout=30,
        check=True,
    )
    assert piped.stdout == rg.stdout
    assert TITLE.encode() in piped.stdout and CLEAR.encode() in piped.stdout
