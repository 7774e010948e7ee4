"""grep lists files in ripgrep's order: folder by folder (``rg --sort path``)."""

from __future__ import annotations

import subprocess

import pytest
from conftest import Daemon, write
from grep_helpers import RG, needs_rg
from kbindex.proto.messages import Grep, GrepReply

pytestmark = [
    pytest.mark.anyio,
    needs_rg,
]


async def test_a_folder_comes_before_a_longer_name_it_starts(daemon: Daemon) -> None:
    # Whole strings would put dma-buf/ first: '-' sorts before '/'.
    for rel in ("dma/ioat/prep.md", "dma-buf/fence.md", "dma.md", "dma/a.md"):
        write(daemon.root / rel, "kmem_cache_alloc here\n")
    await daemon.refresh()
    async with daemon.client() as c:
        reply = await c.request(Grep(pattern="kmem_cache_alloc"), GrepReply)
    ours = [line.path[len(str(daemon.root)) + 1 :] for line in reply.lines]
    assert RG is not None
    rg = subprocess.run(
        [RG, "-uu", "-l", "--sort", "path", "kmem_cache_alloc"],
        cwd=daemon.root, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert ours == [p.removeprefix("./") for p in rg]
    assert ours.index("dma/ioat/prep.md") < ours.index("dma-buf/fence.md")
