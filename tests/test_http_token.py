"""The --http front end's token file: made private, never through a link, kept and shared.

Real directories and files under /tmp; the cases about another user fork and drop to a
throwaway uid (test_trust.py), since only the kernel's own checks tell what they can do.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from kbindex.mcpfront import credential
from kbindex.mcpfront.credential import Credential, UnsafeTokenFile, default_token_path
from test_trust import as_user, needs_root, throwaway_uids


def test_the_token_is_made_private_kept_and_renewed(sockdir: Path) -> None:
    path = sockdir / "kbindex" / "mcp-http.token"
    made = credential.load(str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(made.reveal()) >= 43
    assert credential.load(str(path)).reveal() == made.reveal()  # kept: hosts keep working
    renewed = credential.renew(str(path))
    assert renewed.reveal() != made.reveal()
    assert credential.load(str(path)).reveal() == renewed.reveal()
    assert sorted(os.listdir(path.parent)) == ["mcp-http.token"]  # no temporary left


def test_processes_starting_together_agree_on_one_token(sockdir: Path) -> None:
    """The server and a ``--print-token`` run at the same moment must not each make
    (and print) a token of their own."""
    path = str(sockdir / "kbindex" / "mcp-http.token")
    tokens: list[str] = []
    threads = [
        threading.Thread(target=lambda: tokens.append(credential.load(path).reveal()))
        for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == 1
    assert Path(path).read_text().strip() == tokens[0]


def test_only_the_token_itself_is_accepted() -> None:
    token = "t" * 43
    gate = Credential(token, "/x")
    assert gate.accepts(f"Bearer {token}".encode())
    assert gate.accepts(f"bearer  {token} ".encode())
    for refused in (None, b"", token.encode(), f"Basic {token}".encode(), b"Bearer " + b"t" * 42):
        assert not gate.accepts(refused)


@pytest.mark.parametrize("problem", ["link", "group-writable", "readable-file", "linked-file"])
def test_an_unsafe_place_for_the_token_is_refused_with_the_reason(
    sockdir: Path, problem: str
) -> None:
    elsewhere = sockdir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    directory = sockdir / "kbindex"
    if problem == "link":
        directory.symlink_to(elsewhere)
    else:
        directory.mkdir(mode=0o700)
    if problem == "group-writable":
        directory.chmod(0o770)
    if problem == "readable-file":
        (directory / "mcp-http.token").write_text("r" * 43)
        (directory / "mcp-http.token").chmod(0o644)
    if problem == "linked-file":
        (directory / "mcp-http.token").symlink_to(elsewhere / "planted")
    with pytest.raises(UnsafeTokenFile) as refused:
        credential.load(str(directory / "mcp-http.token"))
    assert str(directory) in str(refused.value)
    assert list(elsewhere.iterdir()) == []  # nothing written through the link


def test_the_default_place_is_the_runtime_directory_whatever_the_socket() -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/1000", "KBINDEX_SOCKET": "/shared/project/kb.sock"}
    assert default_token_path(env) == "/run/user/1000/kbindex/mcp-http.token"


@needs_root
@pytest.mark.parametrize("shape", ["directory", "link"])
def test_a_runtime_directory_made_first_by_another_user_is_refused(shape: str) -> None:
    """The fallback ``/tmp/kbindex-$UID`` can be made by anyone: as a directory of theirs,
    or as a link to one. The user's token is never written there."""
    user, other = throwaway_uids()
    planted = Path("/tmp") / f"kbindex-{user}"
    theirs = Path(tempfile.mkdtemp(prefix="kbtheirs-", dir="/tmp"))
    try:
        os.chown(theirs, other, other)
        theirs.chmod(0o777)
        if shape == "directory":
            planted.mkdir(mode=0o777)
            planted.chmod(0o777)
            os.chown(planted, other, other)
        else:
            os.symlink(theirs, planted)
            os.lchown(planted, other, other)

        def attempt() -> dict[str, str]:
            try:
                credential.load(default_token_path({}))
            except UnsafeTokenFile as exc:
                return {"refused": str(exc)}
            return {"made": "yes"}

        outcome = as_user(user, attempt)
        assert str(planted) in outcome.get("refused", ""), outcome
        assert list(theirs.iterdir()) == []
        if shape == "directory":
            assert list(planted.iterdir()) == []
    finally:
        if planted.is_symlink():
            planted.unlink()
        shutil.rmtree(planted, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)


def test_messages_name_the_command_that_prints_this_token(sockdir: Path) -> None:
    elsewhere = credential.load(str(sockdir / "kbindex" / "mcp-http.token"))
    command = elsewhere.print_command()
    assert command == f"kbindex-mcp --print-token --token-file {sockdir}/kbindex/mcp-http.token"
    assert Credential("t" * 43, default_token_path()).print_command() == (
        "kbindex-mcp --print-token"
    )
