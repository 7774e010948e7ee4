"""The structure settings a person changes while the daemon runs (issue 41): kind rules
and kind boosts put in force by a reload, descriptions of folders returned with their
hits. A real daemon, a real config file rewritten between requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from kbindex.proto.messages import Reload, ReloadReply

from tests.conftest import Daemon, MakeDaemon, write

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def _reload(d: Daemon) -> str:
    async with d.client() as c:
        return (await c.request(Reload(), ReloadReply)).message


async def _kinds(d: Daemon, kind: str) -> list[str]:
    async with d.client() as c:
        listed = await c.find_files("*", kind=[kind], limit=100)
    return sorted(f.relpath for f in listed.files)


@pytest.mark.backends
async def test_a_reload_puts_new_kind_rules_and_boosts_in_force(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    write(root / "CHANGELOG.md", "# Changes\n- retry backoff retry backoff\n")
    write(root / "docs" / "retries.md", "# Retries\nHow the retry backoff works, " + "x " * 40)
    write(root / "drafts" / "retry.md", "retry backoff notes\n")
    config = tmp_path / "config.toml"
    config.write_text("")
    d = make_daemon(root)
    d.extra_args = ["--config", str(config)]
    await d.start()
    assert await _kinds(d, "generated") == []
    async with d.client() as c:
        ranked = [h.relpath for h in (await c.search("retry backoff")).hits]
    assert ranked.index("docs/retries.md") < ranked.index("CHANGELOG.md")
    assert ranked[0] == "drafts/retry.md"

    config.write_text(
        f'[root."{root}"]\nkinds = {{ generated = ["drafts/**"] }}\n[kind_boosts]\nchangelog = 1.0\n'
    )
    await _reload(d)
    # Classified again at the reload itself, not at the file's next change.
    assert await _kinds(d, "generated") == ["drafts/retry.md"]
    assert "drafts/retry.md" not in await _kinds(d, "doc")
    async with d.client() as c:
        ranked = [h.relpath for h in (await c.search("retry backoff")).hits]
    assert ranked.index("CHANGELOG.md") < ranked.index("docs/retries.md")
    assert ranked[-1] == "drafts/retry.md"

    # Rules taken away again: the files get their default kinds back.
    config.write_text("")
    await _reload(d)
    assert await _kinds(d, "generated") == []
    assert "drafts/retry.md" in await _kinds(d, "doc")
