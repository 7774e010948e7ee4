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
        f'[root."{root}"]\nkinds = {{ generated = ["drafts/**"] }}\n'
        "[kind_boosts]\nchangelog = 1.0\n"
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


async def _contexts(d: Daemon, query: str) -> dict[str, str]:
    async with d.client() as c:
        return {h.relpath: h.context for h in (await c.search(query, limit=20)).hits}


async def test_the_deepest_described_folder_describes_a_hit_and_a_reload_changes_it(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    write(root / "inbox.md", "budget review\n")
    write(root / "projects" / "plan.md", "budget plan\n")
    write(root / "projects" / "alpha" / "deep" / "cost.md", "budget cost\n")
    write(root / "projectsx" / "other.md", "budget other\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[root."{root}"]\ndescription = "My notes"\n'
        f'[root."{root}".folders]\n"projects" = "Projects"\n"projects/alpha/" = "Alpha"\n'
    )
    d = make_daemon(root)
    d.extra_args = ["--config", str(config)]
    await d.start()
    assert await _contexts(d, "budget") == {
        "inbox.md": "My notes",
        "projects/plan.md": "Projects",
        "projects/alpha/deep/cost.md": "Alpha",
        # A folder whose name starts like a described one is not inside it.
        "projectsx/other.md": "My notes",
    }

    config.write_text(f'[root."{root}".folders]\n"projects/alpha" = "The alpha project"\n')
    await _reload(d)
    assert await _contexts(d, "budget") == {
        "inbox.md": "",
        "projects/plan.md": "",
        "projects/alpha/deep/cost.md": "The alpha project",
        "projectsx/other.md": "",
    }

    # A folder that leaves the root is refused, and the running descriptions stay.
    config.write_text(f'[root."{root}".folders]\n"../elsewhere" = "Elsewhere"\n')
    refused = d.kbctl("reload")
    assert refused.returncode != 0 and "is not a folder relative to the root" in refused.stderr
    assert (await _contexts(d, "budget"))["projects/alpha/deep/cost.md"] == "The alpha project"
