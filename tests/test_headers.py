"""Front matter beyond Markdown (``indexing.headers``): Org-mode's ``#+KEY:`` lines,
reStructuredText's docinfo and AsciiDoc's header attributes give the same fields, tags
and dates as YAML does, within the same limits; and through a real daemon, the filters
find real files of each format."""

from __future__ import annotations

import datetime as dt

import pytest
from kbindex.daemon.indexing import frontmatter, structure
from kbindex.daemon.indexing.headers import read

from tests.conftest import MakeDaemon, write

ORG = """#+TITLE: Garden plan
#+AUTHOR: Ann Lee
# a comment between the keywords
#+DATE: <2024-05-01 Wed>
#+FILETAGS: :garden:Spring:

* Beds
#+NAME: not-a-header-line
Tomatoes go in the south bed.
"""
RST = """=============
 Garden plan
=============

:Author: Ann Lee
:Date: 2024-05-01
:Tags: garden, spring
:Abstract: Where the beds go,
    and when.

Beds
====

:Status: not docinfo, a field list in the body
"""
ADOC = """// the garden notes
= Garden plan
Ann Lee <ann@example.com>
v1.2, 2024-06-02
:keywords: garden, spring
:revdate: 2024-06-02
:toc:

== Beds

:status: not a header attribute
"""
DAY = dt.datetime(2024, 5, 1, tzinfo=dt.UTC).timestamp()


def test_org_keywords() -> None:
    got = structure.of("garden.org", ORG).front
    assert ("title", "Garden plan") in got.fields and ("author", "Ann Lee") in got.fields
    assert ("date", "<2024-05-01 Wed>") in got.fields
    assert all(key != "name" for key, _ in got.fields)
    assert got.tags == ("garden", "spring")
    assert dict(got.dates) == {"date": DAY}
    assert got.problem == ""


def test_rst_docinfo_after_the_title() -> None:
    got = structure.of("docs/garden.rst", RST).front
    assert ("author", "Ann Lee") in got.fields
    assert ("abstract", "Where the beds go, and when.") in got.fields
    assert all(key != "status" for key, _ in got.fields)
    assert got.tags == ("garden", "spring")
    assert dict(got.dates) == {"date": DAY}


def test_asciidoc_header_attributes() -> None:
    got = structure.of("garden.adoc", ADOC).front
    assert ("keywords", "garden, spring") in got.fields and ("toc", "") not in got.fields
    assert all(key != "status" for key, _ in got.fields)
    assert got.tags == ("garden", "spring")
    assert dict(got.dates) == {"updated": dt.datetime(2024, 6, 2, tzinfo=dt.UTC).timestamp()}


def test_org_timestamp_with_a_time() -> None:
    got = read("#+DATE: [2024-05-01 Wed 9:30]\n\ntext\n", ".org")
    assert got is not None
    assert dict(got.dates) == {"date": DAY + 9.5 * 3600}


@pytest.mark.parametrize(
    ("text", "suffix", "why"),
    [
        ("#+DATE: next spring\n\n* x\n", ".org", "date 'next spring' is not an ISO date"),
        (":date: someday\n\nbody\n", ".rst", "date 'someday' is not an ISO date"),
        (
            "#+TITLE: x\n" + "#+KEYWORD: filler\n" * (frontmatter.MAX_BYTES // 16),
            ".org",
            "header longer than 64 KiB",
        ),
    ],
)
def test_a_header_that_cannot_be_read_is_a_problem_of_its_file(
    text: str, suffix: str, why: str
) -> None:
    got = read(text, suffix)
    assert got is not None and why in got.problem
    assert got.fields  # what could be read is kept


def test_limits_hold_as_for_yaml() -> None:
    many = "".join(f"#+K{i}: {'v' * 250}\n" for i in range(frontmatter.MAX_FIELDS + 50))
    got = read(many + "\nbody\n", ".org")
    assert got is not None and len(got.fields) == frontmatter.MAX_FIELDS
    assert all(len(v) == frontmatter.MAX_VALUE_CHARS for _, v in got.fields)


def test_no_header_and_other_formats() -> None:
    assert structure.of("a.org", "* Heading\n#+TITLE: too late\n").front.fields == ()
    assert structure.of("a.rst", "Title\n=====\n\nText :date: 2024-01-01\n").front.fields == ()
    assert read("#+TITLE: x\n", ".txt") is None


@pytest.mark.slow
@pytest.mark.anyio
async def test_filters_find_org_rst_and_asciidoc_files(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "garden.org", ORG)
    write(d.root / "docs" / "garden.rst", RST)
    write(d.root / "garden.adoc", ADOC)
    write(d.root / "plain.txt", "garden notes without a header\n")
    write(d.root / "bad.org", "#+DATE: next spring\n\ngarden\n")
    d.extra_args = ["--include-ext", "*"]
    await d.start()
    async with d.client() as c:
        tagged = await c.search("garden", tag=["spring"], limit=10)
        assert sorted(h.relpath for h in tagged.hits) == [
            "docs/garden.rst",
            "garden.adoc",
            "garden.org",
        ]
        dated = await c.find_files("*", date=["2024-05"], limit=10)
        assert sorted(f.relpath for f in dated.files) == ["docs/garden.rst", "garden.org"]
        updated = await c.find_files("*", date=["updated:2024-06"], limit=10)
        assert [f.relpath for f in updated.files] == ["garden.adoc"]
        authored = await c.find_files("*", field=["author=Ann Lee"], limit=10)
        assert sorted(f.relpath for f in authored.files) == ["docs/garden.rst", "garden.org"]
        status = await c.status()
    # The header that could not be read is reported for its file, which is indexed.
    assert any(
        e.path == str(d.root / "bad.org") and "not an ISO date" in e.reason
        for e in status.recent_errors
    )
    async with d.client() as c:
        assert "bad.org" in {h.relpath for h in (await c.search("garden", limit=10)).hits}
