"""The roles of docs/postgres.md on a real server: the owner, writers and a reader, made
with the SQL the document gives (run as it is), each able to do what it says only."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, wait_for, write
from test_postgres import shared

psycopg = pytest.importorskip("psycopg")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DOC = Path(__file__).resolve().parent.parent / "docs" / "postgres.md"
ROLES, GRANTS, ROW_SECURITY = range(3)
ALPHAS = "SELECT id FROM kbindex.kb_files WHERE machine = 'alpha'"
BETAS = "SELECT id FROM kbindex.kb_files WHERE machine = 'beta'"


def sql_blocks() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def run(dsn: str, sql: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in (s.strip() for s in sql.split(";")):
            if statement:
                conn.execute(statement)


@pytest.fixture
def team(pg_server: Any) -> Iterator[dict[str, str]]:
    """The database ``kbindex`` and the document's roles: a DSN per role."""
    super_dsn = pg_server.dsn("postgres")
    run(super_dsn, sql_blocks()[ROLES])
    dsns = {
        role: pg_server.dsn("kbindex").replace("user=postgres", f"user={role}")
        for role in ("kb_owner", "alpha", "beta", "searcher")
    }
    dsns["postgres"] = pg_server.dsn("kbindex")
    try:
        yield dsns
    finally:
        pg_server.drop_database("kbindex")
        with psycopg.connect(super_dsn, autocommit=True) as conn:
            for role in ("alpha", "beta", "searcher", "kb_writers", "kb_readers", "kb_owner"):
                conn.execute(f"DROP ROLE IF EXISTS {role}")


def migrate(dsn: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbindex.daemon.app", "db", "migrate", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=60,
    )


def refused(dsn: str, sql: str) -> str:
    """The error ``sql`` gets as that role (it must get one)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            return type(exc).__name__
    raise AssertionError(f"allowed: {sql}")


def count(dsn: str, sql: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.rowcount if cur.description is None else int(cur.fetchone()[0])


async def test_each_role_can_do_what_the_document_says_and_no_more(
    team: dict[str, str], tmp_path: Path
) -> None:
    blocks = sql_blocks()
    # A writer cannot make the schema; its owner can, then grants as the document says.
    assert "may not create the shared index's schema" in migrate(team["alpha"]).stderr
    made = migrate(team["kb_owner"])
    assert made.returncode == 0 and "went from nothing to version" in made.stdout, made
    run(team["kb_owner"], blocks[GRANTS])

    # Before PostgreSQL 15 every role could create in public: the reader plants the
    # function that once ran inside a writer's inserts (an exact-typed one beats the
    # polymorphic built-in), and others the writer's SQL calls, each recording its calls.
    run(team["postgres"], "GRANT CREATE ON SCHEMA public TO searcher")
    run(
        team["searcher"],
        """CREATE TABLE public.ran(who text);
        GRANT INSERT ON public.ran TO PUBLIC;
        CREATE FUNCTION public.array_positions(text[], text) RETURNS integer[]
            LANGUAGE sql AS $$ INSERT INTO public.ran VALUES (current_user) RETURNING ARRAY[1] $$;
        CREATE FUNCTION public.regexp_replace(text, text, text, text) RETURNS text
            LANGUAGE sql AS $$ INSERT INTO public.ran VALUES (current_user) RETURNING 'x' $$;
        CREATE FUNCTION public.array_remove(text[], text) RETURNS text[]
            LANGUAGE sql AS $$ INSERT INTO public.ran VALUES (current_user) RETURNING $1 $$""",
    )

    alpha_root, beta_root = tmp_path / "alpha-notes", tmp_path / "beta-notes"
    # Front matter and a link: a writer writes kb_fields and kb_links rows too (issue 41).
    write(
        alpha_root / "lanterns.md",
        "---\ntags: [spring]\n---\n# Lanterns\nthe lantern festival in spring,"
        " like [the kites](kites.md)\n",
    )
    write(beta_root / "kites.md", "# Kites\nthe kite festival in autumn\n")
    write(beta_root / "tails.md", "---\ntags: [autumn]\n---\n# Tails\nsee [kites](kites.md)\n")
    daemons: list[Daemon] = []
    try:
        for name, root in (("alpha", alpha_root), ("beta", beta_root)):
            daemons.append(shared(tmp_path, name, team[name], root))
        daemons.append(shared(tmp_path, "searcher", team["searcher"]))
        for d in daemons:
            await d.start()
        alpha, beta, reader = daemons
        assert sorted(await reader.search_paths("festival")) == ["kites.md", "lanterns.md"]
        for table in ("kb_fields", "kb_links"):  # the daemons wrote them
            assert count(team["postgres"], f"SELECT count(*) FROM kbindex.{table}") >= 2, table
        assert count(team["postgres"], "SELECT count(*) FROM public.ran") == 0

        # The reader reads and changes nothing, nor creates anything in the schema.
        for sql in (
            "DELETE FROM kbindex.kb_files",
            "UPDATE kbindex.kb_docs SET body = 'planted'",
            "INSERT INTO kbindex.kb_machines(name) VALUES ('mallory')",
            "CREATE FUNCTION kbindex.kb_x() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE TABLE kbindex.x(y int)",
        ):
            assert refused(team["searcher"], sql) == "InsufficientPrivilege", sql
        # A writer creates nothing either: not in the schema, nor a schema of its own.
        for sql in (
            "CREATE FUNCTION kbindex.kb_x() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE SCHEMA mine",
            "ALTER TABLE kbindex.kb_files DISABLE ROW LEVEL SECURITY",
        ):
            assert refused(team["alpha"], sql) == "InsufficientPrivilege", sql

        # With row-level security on, a writer changes its own machine's rows only.
        run(team["kb_owner"], blocks[ROW_SECURITY])
        for sql in (
            "DELETE FROM kbindex.kb_files WHERE machine = 'alpha'",
            f"DELETE FROM kbindex.kb_docs WHERE id IN ({ALPHAS})",
            f"DELETE FROM kbindex.kb_postings WHERE doc IN ({ALPHAS})",
            f"UPDATE kbindex.kb_docs SET body = 'planted' WHERE id IN ({ALPHAS})",
            "UPDATE kbindex.kb_machines SET holder = NULL WHERE name = 'alpha'",
            # The structure rows of issue 41 name their document by id only.
            f"DELETE FROM kbindex.kb_fields WHERE doc IN ({ALPHAS})",
            f"UPDATE kbindex.kb_fields SET value = 'planted' WHERE doc IN ({ALPHAS})",
            f"DELETE FROM kbindex.kb_links WHERE doc IN ({ALPHAS})",
            f"UPDATE kbindex.kb_links SET target = 'planted.md' WHERE doc IN ({ALPHAS})",
        ):
            assert count(team["beta"], sql) == 0, sql
        for sql in (  # nor add rows to another machine's document
            f"INSERT INTO kbindex.kb_fields(doc, source, key, value) SELECT id, 'tag', 'tag',"
            f" 'planted' FROM ({ALPHAS}) a",
            f"INSERT INTO kbindex.kb_links(doc, target, wiki, text, line) SELECT id,"
            f" 'planted.md', false, 'x', 1 FROM ({ALPHAS}) a",
            f"UPDATE kbindex.kb_fields SET doc = ({ALPHAS} LIMIT 1) WHERE doc IN ({BETAS})",
        ):
            assert refused(team["beta"], sql) == "InsufficientPrivilege", sql
        assert await reader.search_paths("lanterns", tag=["spring"]) == ["lanterns.md"]
        async with alpha.client() as c:
            linked = await c.links(str(alpha_root / "lanterns.md"))
        assert [Path(x.target).name for x in linked.links] == ["kites.md"], linked
        # Its own rows it still changes: a daemon's rewrite, and by hand.
        write(beta_root / "tails.md", "---\ntags: [winter]\n---\n# Tails\nsee [kites](kites.md)\n")
        await beta.refresh()
        assert await reader.search_paths("tails", tag=["winter"]) == ["tails.md"]
        assert count(team["beta"], f"DELETE FROM kbindex.kb_links WHERE doc IN ({BETAS})") == 1
        assert count(team["beta"], f"DELETE FROM kbindex.kb_fields WHERE doc IN ({BETAS})") >= 1
        assert await reader.search_paths("lanterns") == ["lanterns.md"]
        assert count(team["beta"], "DELETE FROM kbindex.kb_files WHERE machine = 'beta'") == 2
        # Its documents' postings go with them (a trigger, not a foreign key, since schema 6).
        orphans = "SELECT count(*) FROM kbindex.kb_postings p WHERE NOT EXISTS"
        orphans += " (SELECT 1 FROM kbindex.kb_docs d WHERE d.id = p.doc)"
        assert count(team["postgres"], orphans) == 0
        # ...and cannot take another role's machine name.
        alpha.stop()
        impostor = shared(tmp_path, "impostor", team["beta"], alpha_root, machine="alpha")
        daemons.append(impostor)
        await impostor.start(wait_scan=False)

        async def why() -> str:
            async with impostor.client() as c:
                return (await c.status()).index_error

        error = await wait_for(why, timeout=30)
        assert "machine 'alpha' belongs to PostgreSQL role alpha, not beta" in error, error
        assert await reader.search_paths("lanterns") == ["lanterns.md"]
        assert count(team["postgres"], "SELECT count(*) FROM public.ran") == 0
    finally:
        for d in daemons:
            d.stop()


async def test_the_grants_cover_the_tables_a_later_migrate_adds(
    team: dict[str, str], tmp_path: Path
) -> None:
    from kbindex.daemon.backends.postgres import connections, schema

    # The owner made schema 4 and granted as the document says, once.
    with connections.connect(team["kb_owner"], role="owner") as conn:
        assert schema.migrate(conn, upto=4) == (0, 4)
    run(team["kb_owner"], sql_blocks()[GRANTS])
    # A later kbindex adds tables (version 5: kb_fields, kb_links): migrate, no grant.
    made = migrate(team["kb_owner"])
    assert made.returncode == 0 and "went from 4 to" in made.stdout, made

    root = tmp_path / "alpha-notes"
    write(
        root / "lanterns.md",
        "---\ntags: [spring]\n---\n# Lanterns\nthe lantern festival, like [the kites](kites.md)\n",
    )
    writer = shared(tmp_path, "alpha", team["alpha"], root)
    reader = shared(tmp_path, "searcher", team["searcher"])
    try:
        for d in (writer, reader):
            await d.start()
        async with writer.client() as c:
            assert (await c.status()).index_error == ""
            linked = await c.links(str(root / "lanterns.md"))
        assert [Path(x.target).name for x in linked.links] == ["kites.md"], linked
        assert await reader.search_paths("festival", tag=["spring"]) == ["lanterns.md"]
        assert count(team["searcher"], "SELECT count(*) FROM kbindex.kb_links") == 1
        # The new tables are the reader's to read only, and the version the owner's.
        for sql in ("DELETE FROM kbindex.kb_fields", "DELETE FROM kbindex.kb_links"):
            assert refused(team["searcher"], sql) == "InsufficientPrivilege", sql
        sql = "UPDATE kbindex.kb_meta SET value = '99'"
        assert refused(team["alpha"], sql) == "InsufficientPrivilege"
    finally:
        for d in (writer, reader):
            d.stop()
