"""The structure settings a person changes while the daemon runs (issue 41): kind rules
and kind boosts put in force by a reload, descriptions of folders returned with their
hits. A real daemon, a real config file rewritten between requests."""

from __future__ import annotations

import datetime as dt
import os
import time
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
    assert "1 file(s) given another kind by the new rules" in await _reload(d)
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


@pytest.mark.backends
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
    shown = d.kbctl("search", "budget", "--path", "projects/")
    assert shown.returncode == 0, shown.stderr
    assert f"{root / 'projects' / 'plan.md'}:1  (" in shown.stdout
    assert shown.stdout.count("  — Projects\n") == 1 and shown.stdout.count("  — Alpha\n") == 1

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


def _aged(path: Path, days: float) -> None:
    when = time.time() - days * 86400
    os.utime(path, (when, when))


@pytest.mark.backends
async def test_a_recency_preference_reorders_only_when_asked(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    # By words alone the old note ranks first: it says "harvest" more often.
    _aged(write(root / "old.md", "# Harvest\nharvest harvest harvest log\n"), 400)
    _aged(write(root / "fresh.md", "# Log\nthe harvest log, some more words here\n"), 1)
    # Modified long ago, but its front matter dates it yesterday.
    dated = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    _aged(write(root / "dated.md", f"---\nupdated: {dated}\n---\nharvest log notes, words\n"), 400)
    config = tmp_path / "config.toml"
    config.write_text("")
    d = make_daemon(root)
    d.extra_args = ["--config", str(config)]
    await d.start()

    async def ranked(**options: object) -> list[str]:
        async with d.client() as c:
            return [h.relpath for h in (await c.search("harvest log", **options)).hits]  # type: ignore[arg-type]

    plain = await ranked()
    assert plain[0] == "old.md"
    assert await ranked(recent="off") == plain
    recent = await ranked(recent="30d")
    assert recent[-1] == "old.md" and set(recent[:2]) == {"fresh.md", "dated.md"}
    assert await ranked(recent="on") == recent  # 90 days: old.md is over four half-lives old

    # The setting turns it on for every search; "off" still asks for none.
    config.write_text('recency_half_life = "30d"\n')
    await _reload(d)
    assert (await ranked())[-1] == "old.md"
    assert await ranked(recent="off") == plain
    assert d.kbctl("search", "harvest", "log", "--recent=off").stdout.index("old.md") < (
        d.kbctl("search", "harvest", "log", "--recent=off").stdout.index("fresh.md")
    )

    bad = d.kbctl("search", "harvest", "--recent=soon")
    assert bad.returncode == 1 and "'soon' is not a length of time" in bad.stderr
    config.write_text('recency_half_life = "often"\n')
    refused = d.kbctl("reload")
    assert refused.returncode != 0 and "recency_half_life 'often'" in refused.stderr


async def test_mcp_search_prefers_recent_files_with_a_where_term(make_daemon: MakeDaemon) -> None:
    from mcp_helpers import mcp_stdio, structured, text

    d = make_daemon()
    _aged(write(d.root / "old.md", "# Harvest\nharvest harvest harvest log\n"), 400)
    _aged(write(d.root / "fresh.md", "# Log\nthe harvest log, some more words here\n"), 1)
    await d.start()
    async with mcp_stdio(d.socket) as client:

        async def ranked(where: str) -> list[str]:
            found = await client.call_tool("search", {"query": "harvest log", "where": where})
            return [r["relpath"] for r in structured(found)["results"]]

        assert await ranked("") == ["old.md", "fresh.md"]
        assert await ranked("prefer:recent") == ["fresh.md", "old.md"]
        assert await ranked("prefer:recent:100y") == ["old.md", "fresh.md"]
        bad = await client.call_tool("find_files", {"where": "prefer:recent"})
        assert bad.is_error and "works in search only" in text(bad)
