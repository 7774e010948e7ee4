"""Filters on what files hold besides their words (issue 41), through a real daemon: a
note's kind, tags, front matter fields and dates, its modified time and its root's
name, checked after every edit, move and delete of real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kbindex.daemon.backends import BACKENDS
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import Grep, GrepReply

from tests.conftest import MakeDaemon, write

pytestmark = pytest.mark.anyio

PLAN = """---
title: Launch plan
tags: [project]
status: draft
created: 2024-05-01
---
# Launch plan
The launch needs a checklist. #alpha
"""
REVIEW = """---
status: done
created: 2023-02-10
---
# Launch review
How the launch went. #beta
"""


def _tree(root: Path) -> None:
    write(root / "notes" / "plan.md", PLAN)
    write(root / "notes" / "review.md", REVIEW)
    write(root / "src" / "launch.py", "def launch():\n    return 'launch'\n")
    write(root / "CHANGELOG.md", "# Changes\n- launch: first launch\n")
    write(root / "broken.md", "---\nstatus: [draft\n---\nlaunch notes with a bad header\n")


@pytest.mark.slow
@pytest.mark.backends
async def test_each_filter_follows_edits_moves_and_deletes(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    _tree(d.root)
    d.extra_args = ["--include-ext", "*"]
    await d.start()

    async def found(**filters: object) -> tuple[list[str], list[str], list[str]]:
        """Search, find_files and grep ``launch`` with ``filters``: the relpaths of
        each answer."""
        async with d.client() as c:
            hits = await c.search("launch", limit=20, **filters)
            files = await c.find_files("*", **filters)
            grep = await c.request(Grep(pattern="launch", files_only=True, **filters), GrepReply)  # type: ignore[arg-type]
        root = f"{d.root}/"
        return (
            sorted(h.relpath for h in hits.hits),
            sorted(f.relpath for f in files.files),
            sorted(line.path.removeprefix(root) for line in grep.lines),
        )

    async def each(expected: list[str], **filters: object) -> None:
        hits, files, grep = await found(**filters)
        assert hits == expected, filters
        assert grep == expected, filters
        assert set(expected) <= set(files), filters

    await each(
        ["CHANGELOG.md", "broken.md", "notes/plan.md", "notes/review.md"], kind=["doc", "changelog"]
    )
    await each(["notes/plan.md"], tag=["alpha"])
    await each(["notes/plan.md"], tag=["#Project", "alpha"])
    await each(["notes/plan.md"], field=["status=Draft"])
    await each(["notes/review.md"], date=["created:2023"])
    await each(["notes/plan.md", "notes/review.md"], date=["2023..2025"])
    await each(["src/launch.py"], kind=["code"])
    assert (await found(kind=["code"]))[1] == ["src/launch.py"]
    await each(
        ["CHANGELOG.md", "broken.md", "notes/plan.md", "notes/review.md", "src/launch.py"],
        modified="1h",
    )
    await each([], modified="..2020")
    # The bad header is reported for its file, and the file is indexed all the same.
    async with d.client() as c:
        status = await c.status()
    assert any(
        e.path == str(d.root / "broken.md") and "front matter not read" in e.reason
        for e in status.recent_errors
    )
    # ... and kbctl why says it for that file whenever asked.
    why = d.kbctl("why", str(d.root / "broken.md"))
    assert why.stdout.startswith(f"{d.root}/broken.md: indexed; front matter not read: invalid")
    assert d.kbctl("why", str(d.root / "notes" / "plan.md")).stdout.endswith(": indexed\n")

    # An edit: the tags and fields are the new text's.
    write(d.root / "notes" / "plan.md", PLAN.replace("#alpha", "#beta").replace("draft", "final"))
    await d.refresh()
    await each([], tag=["alpha"])
    await each(["notes/plan.md", "notes/review.md"], tag=["beta"])
    await each(["notes/plan.md"], field=["status=final"])
    await each([], field=["status=draft"])

    # A move: the note keeps its fields under its new path, and its kind is the new one's.
    os.rename(d.root / "notes" / "plan.md", d.root / "notes" / "CHANGELOG.md")
    await d.refresh()
    await each(["notes/CHANGELOG.md", "notes/review.md"], tag=["beta"])
    await each(["CHANGELOG.md", "notes/CHANGELOG.md"], kind=["changelog"])

    # A delete: its rows go with it.
    (d.root / "notes" / "review.md").unlink()
    await d.refresh()
    await each(["notes/CHANGELOG.md"], tag=["beta"])
    await each([], date=["created:2023"])


@pytest.mark.slow
@pytest.mark.backends
async def test_filters_that_match_nothing_or_cannot_be_read_say_so(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    _tree(d.root)
    await d.start()
    async with d.client() as c:
        reply = await c.search("launch", tag=["nosuchtag"])
        assert reply.hits == [] and reply.notes == ["no indexed file has tag 'nosuchtag'"]
        reply = await c.search("launch", tag=["alpha"], field=["status=done"])
        assert reply.notes == ["no indexed file passes all of these filters together"]
        listed = await c.find_files("*", field=["owner=nobody"])
        assert listed.notes == ["no indexed file has field owner=nobody"]
        # Each passes alone, and with the path filter no file does.
        reply = await c.search("launch", path="notes/", kind=["changelog"])
        why = "no indexed file that the path filter 'notes/' names passes these filters"
        assert reply.hits == [] and reply.notes == [why]
        listed = await c.find_files("broken.md", tag=["alpha"])
        why = "no indexed file that the path filter 'broken.md' names passes these filters"
        assert listed.notes == [why]
        listed = await c.find_files("*", date=["created:2020", "1999"])
        assert listed.notes == [
            "no indexed file has a front matter created date in that span",
            "no indexed file has a front matter date in that span",
        ]
        for bad, why in [
            ({"kind": ["docs"]}, "unknown kind 'docs'"),
            ({"field": ["status"]}, "is not key=value"),
            ({"modified": "last tuesday"}, "is not a time span"),
            ({"modified": ""}, "modified filter '' is not a time span"),
            ({"date": ["due:2024"]}, "'due' is not a front matter date"),
            ({"date": ["created:2024-13"]}, "is not a time span"),
            ({"scope": ["nowhere"]}, "no root is named 'nowhere'"),
        ]:
            with pytest.raises(DaemonError, match=why) as raised:
                await c.search("launch", **bad)
            assert raised.value.code == "bad_filter"
        assert (await c.search("launch")).hits  # the daemon serves on


@pytest.mark.slow
@pytest.mark.backends
async def test_a_named_small_root_gets_its_full_top_k(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """A scope is applied inside the query: a small collection whose hits rank below
    every hit of a large one still fills the list. A name given in the configuration
    wins over another root's folder name."""
    big, small, folder = tmp_path / "big", tmp_path / "small", tmp_path / "other" / "team"
    write(folder / "other.md", "# Other\nnothing of that\n")
    wikis = [tmp_path / "a" / "wiki", tmp_path / "b" / "wiki"]
    for wiki in wikis:
        write(wiki / "page.md", "# Page\n")
    for i in range(120):
        write(big / f"n{i}.md", f"# Launch {i}\nlaunch launch launch launch\n")
    for i in range(6):
        write(small / f"s{i}.md", f"# Notes {i}\nlong text " + "filler words " * 80 + "launch\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[root."{small}"]\nname = "team"\ndescription = "The team handbook"\n')
    d = make_daemon(big, small, folder, *wikis)
    d.extra_args = ["--config", str(config)]
    await d.start()
    async with d.client() as c:
        everything = await c.search("launch", limit=5)
        assert all(h.root == str(big) for h in everything.hits)
        with pytest.raises(DaemonError, match=r"\(scopes: big, team\)"):
            await c.search("launch", scope=["other"])
        with pytest.raises(DaemonError, match="'wiki': several roots' folders are, so none"):
            await c.search("launch", scope=["wiki"])
        # Status names each root's scope, so that a client need not guess it.
        roots = {r.path: (r.scope, r.description) for r in (await c.status()).roots}
        assert roots == {
            str(big): ("big", ""),
            str(small): ("team", "The team handbook"),
            str(folder): ("", ""),
            **{str(wiki): ("", "") for wiki in wikis},
        }
        scoped = await c.search("launch", limit=5, scope=["team"])
        assert len(scoped.hits) == 5 and scoped.total_hits == 6
        assert {h.root for h in scoped.hits} == {str(small)}
        assert {h.context for h in scoped.hits} == {"The team handbook"}
        by_folder = await c.search("launch", limit=5, scope=["big"])
        assert {h.root for h in by_folder.hits} == {str(big)} and by_folder.hits[0].context == ""
        assert (await c.find_files("*", scope=["team"], limit=100)).total == 6
    listed = d.kbctl("roots").stdout
    assert f"{small}  " in listed and "; --scope team\n    The team handbook\n" in listed

    # A file moved to another root changes scope; an edited or deleted one follows too.
    os.rename(small / "s0.md", big / "s0.md")
    write(small / "s1.md", "# Notes 1\nno longer about that\n")
    (small / "s2.md").unlink()
    await d.refresh()
    async with d.client() as c:
        scoped = await c.search("launch", limit=5, scope=["team"])
        assert sorted(h.relpath for h in scoped.hits) == ["s3.md", "s4.md", "s5.md"]
        assert {h.context for h in scoped.hits} == {"The team handbook"}
        moved = await c.search("filler launch", limit=5, scope=["big"])
        assert [(h.root, h.relpath, h.context) for h in moved.hits] == [(str(big), "s0.md", "")]
        listed = await c.find_files("*", scope=["team"], limit=100)
        assert sorted(f.relpath for f in listed.files) == ["s1.md", "s3.md", "s4.md", "s5.md"]


@pytest.mark.slow
@pytest.mark.backends
async def test_mcp_where_filters_search_grep_and_find_files(make_daemon: MakeDaemon) -> None:
    from mcp_helpers import mcp_stdio, structured, text

    d = make_daemon()
    _tree(d.root)
    d.extra_args = ["--include-ext", "*"]
    await d.start()
    async with mcp_stdio(d.socket) as client:
        stats = text(await client.call_tool("get_index_stats", {}))
        assert f"- {d.root}: live, 5 files, where scope:{d.root.name}\n" in stats, stats
        found = structured(
            await client.call_tool("search", {"query": "launch", "where": "tag:alpha status=draft"})
        )
        assert [r["relpath"] for r in found["results"]] == ["notes/plan.md"]
        listed = structured(await client.call_tool("find_files", {"where": "kind:code"}))
        assert [f["path"] for f in listed["files"]] == [str(d.root / "src" / "launch.py")]
        grep = await client.call_tool("grep", {"pattern": "launch", "where": "created:2023"})
        assert "notes/review.md" in text(grep) and "plan.md" not in text(grep)
        for tool, args in [
            ("search", {"query": "launch"}),
            ("grep", {"pattern": "launch"}),
            ("find_files", {}),
        ]:
            bad = await client.call_tool(tool, {**args, "where": "kind:docs"})
            assert bad.is_error and text(bad).startswith(
                "A filter of 'where' cannot be used (unknown kind 'docs'; the kinds are doc,"
            ), text(bad)
        bad = await client.call_tool("search", {"query": "launch", "where": "alpha"})
        assert bad.is_error and "is not a filter" in text(bad)
        # A glob beside links: would be dropped without a word: it is refused.
        args = {"glob": "*.py", "where": "linked-from:notes/plan.md"}
        bad = await client.call_tool("find_files", args)
        assert bad.is_error and "leave glob out" in text(bad), text(bad)


@pytest.mark.slow
@pytest.mark.backends
async def test_kind_boosts_rank_docs_above_changelogs_and_are_configurable(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    # The changelog says "retry backoff" more often, in fewer words: bm25 alone ranks it
    # above the guide.
    write(root / "CHANGELOG.md", "# Changes\n- retry backoff retry backoff\n")
    write(root / "docs" / "retries.md", "# Retries\nHow the retry backoff works, " + "x " * 40)
    write(root / "vendor" / "lib" / "retry.md", "retry backoff retry backoff\n")
    d = make_daemon(root)
    await d.start()
    async with d.client() as c:
        ranked = [h.relpath for h in (await c.search("retry backoff")).hits]
    assert ranked[0] == "docs/retries.md"
    d.stop()

    config = tmp_path / "config.toml"
    config.write_text("[kind_boosts]\nchangelog = 1.0\nvendored = 1.0\n")
    d.extra_args = ["--config", str(config)]
    await d.start()
    async with d.client() as c:
        ranked = [h.relpath for h in (await c.search("retry backoff")).hits]
    assert ranked[-1] == "docs/retries.md"


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ("[kind_boosts]\ndocs = 2\n", "unknown kind 'docs'"),
        ("[kind_boosts]\nchangelog = 0\n", "must be above 0"),
        ('[kind_boosts]\nchangelog = "low"\n', "a table of kind = number"),
        ('[root."ROOT"]\nkinds = { docs = ["*.md"] }\n', "unknown kind 'docs'"),
        ('[root."ROOT"]\nname = 3\n', "name must be text"),
    ],
)
def test_kind_settings_that_cannot_be_used_are_refused(
    tmp_path: Path, table: str, why: str
) -> None:
    import argparse

    from kbindex.daemon import settings

    root = tmp_path / "root"
    root.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'roots = ["{root}"]\n' + table.replace("ROOT", str(root)))
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser, tuple(BACKENDS))
    args = parser.parse_args(["--config", str(config), "--state-dir", str(tmp_path / "s")])
    with pytest.raises(settings.SettingsError, match=why):
        settings.load(args, {})
    config.write_text(f'roots = ["{root}"]\n[kind_boosts]\nchangelog = 0.3\n')
    loaded = settings.load(parser.parse_args(["--config", str(config)]), {})
    assert dict(loaded.kind_boosts or ())["changelog"] == 0.3
