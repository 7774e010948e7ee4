"""The shared index on a real PostgreSQL server (tests/pgserver.py): several daemons on one
database, a lost server, hostile queries. The end-to-end search, grep, read_file and
find_files tests that run on SQLite run here too (``@pytest.mark.backends``); this file
holds what only a shared index has."""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import Daemon, wait_exit, wait_for, write
from grep_helpers import Case, grep
from kbindex.daemon.backends import BACKENDS
from kbindex.daemon.backends.postgres import schema
from kbindex.proto.client import DaemonError

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def shared(base: Path, name: str, dsn: str, *roots: Path, machine: str = "") -> Daemon:
    """A daemon of its own (state, socket) on the shared database ``dsn``."""
    (base / name).mkdir(parents=True, exist_ok=True)
    sockdir = Path(f"/tmp/kbt-{name}-{base.name[-8:]}")
    sockdir.mkdir(exist_ok=True)
    d = Daemon(base / name, sockdir, list(roots))
    d.backend_args = ("--backend", "postgres", "--dsn", dsn, "--machine", machine or name)
    if not roots:
        d.extra_args = ["--no-roots"]
    return d


@pytest.fixture
def pg(pg_index_dsn: str, tmp_path: Path) -> Any:
    started: list[Daemon] = []

    def make(name: str, *roots: Path, machine: str = "") -> Daemon:
        d = shared(tmp_path, name, pg_index_dsn, *roots, machine=machine)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()


async def test_two_machines_write_one_database_and_a_third_daemon_serves_both(
    pg: Any, tmp_path: Path
) -> None:
    alpha_root, beta_root = tmp_path / "alpha-notes", tmp_path / "beta-notes"
    write(alpha_root / "lanterns.md", "# Lanterns\nthe lantern festival in spring\n")
    write(alpha_root / "shared.md", "kept by alpha\n")
    write(beta_root / "kites.md", "# Kites\nthe kite festival in autumn\n")
    write(beta_root / "shared.md", "kept by beta\n")
    alpha, beta, reader = pg("alpha", alpha_root), pg("beta", beta_root), pg("reader")
    for d in (alpha, beta, reader):
        await d.start()
    async with reader.client() as c:
        found = await c.search("festival")
        assert sorted((h.machine, h.relpath) for h in found.hits) == [
            ("alpha", "lanterns.md"),
            ("beta", "kites.md"),
        ]
        status = await c.status()
    assert status.backend is not None and status.backend.name == "postgres"
    assert {m.machine: m.files for m in status.backend.machines} == {"alpha": 2, "beta": 2}
    assert status.roots == [] and status.indexed_files == 4

    # Each daemon changes its own rows only: alpha deleting its shared.md leaves beta's.
    (alpha_root / "shared.md").unlink()
    await alpha.refresh()
    async with reader.client() as c:
        kept = await c.search("kept")
    assert [(h.machine, h.relpath, h.snippet) for h in kept.hits] == [
        ("beta", "shared.md", "⟦kept⟧ by beta")
    ]
    # A daemon that was down catches up by reconciling when it starts again.
    beta.stop()
    write(beta_root / "kites.md", "# Kites\nthe kite contest in autumn\n")
    await beta.start()
    async with reader.client() as c:
        assert [h.machine for h in (await c.search("festival")).hits] == ["alpha"]
        assert [h.machine for h in (await c.search("contest")).hits] == ["beta"]

    async def counted() -> str:
        out = reader.kbctl("status").stdout  # counts are taken again within seconds
        return out if "machines: alpha 1, beta 2" in out else ""

    assert "backend: postgres" in await wait_for(counted, timeout=15, interval=0.5)


async def test_a_second_daemon_for_the_same_machine_and_root_is_refused(
    pg: Any, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    write(root / "a.md", "first words\n")
    first = pg("first", root, machine="same")
    await first.start()
    second = pg("second", root, machine="same")
    await second.start(wait_scan=False)

    async def refused() -> str:
        async with second.client() as c:
            return (await c.status()).index_error

    error = await wait_for(refused, timeout=20)
    assert "machine 'same' is written by another kbindexd" in error, error
    assert "give each daemon its own --machine name" in error
    # The first one keeps indexing its root undisturbed.
    write(root / "b.md", "second words\n")
    await first.refresh()
    assert await first.search_paths("second") == ["b.md"]
    # Once the first one stops, its lock goes with its connection: the second takes over.
    first.stop()
    write(root / "c.md", "third words\n")

    async def taken_over() -> bool:
        return await second.search_paths("third") == ["c.md"]

    await wait_for(taken_over, timeout=30, interval=0.2)
    assert await refused() == ""


async def test_a_database_of_a_newer_kbindexd_is_refused_with_the_reason(
    pg: Any, tmp_path: Path, pg_index_dsn: str
) -> None:
    with psycopg.connect(pg_index_dsn, autocommit=True) as conn:
        conn.execute("UPDATE kb_meta SET value = '99' WHERE key = 'schema'")
    root = tmp_path / "notes"
    write(root / "a.md", "words\n")
    d = pg("old", root)
    proc = d.spawn()
    assert wait_exit(proc, timeout=30) == 2  # not restarted by systemd: it would not help
    newer = f"newer than this kbindexd ({schema.SCHEMA_VERSION}); upgrade kbindex on this machine"
    assert newer in d.log()
    with psycopg.connect(pg_index_dsn) as conn:  # nothing was written into it
        assert conn.execute("SELECT count(*) FROM kb_files").fetchone() == (0,)


async def test_a_server_restart_mid_index_loses_nothing(
    pg: Any, tmp_path: Path, pg_server: Any
) -> None:
    root = tmp_path / "many"
    for i in range(3000):
        write(root / f"d{i % 30}" / f"n{i}.md", f"note {i} about topic{i % 7} and more\n" * 20)
    d = pg("one", root)
    await d.start(wait_scan=False)

    async def indexing() -> bool:
        async with d.client() as c:
            s = await c.status()
            return s.progress is not None and s.progress.done > 0

    await wait_for(indexing, timeout=30, interval=0.005)
    pg_server.restart()  # every connection is cut, some batch with it

    async with d.client() as c:  # answered, or refused as unavailable: never a crash
        codes = []
        for _ in range(20):
            try:
                await c.search("topic3")
            except DaemonError as exc:
                codes.append(exc.code)
    assert set(codes) <= {"unavailable"}

    async def all_indexed() -> bool:
        async with d.client() as c:
            s = await c.status()
            return s.indexed_files == 3000 and not s.index_error and s.progress is None

    await wait_for(all_indexed, timeout=90, interval=0.2)
    async with d.client() as c:
        found = await c.search("topic3", limit=5)
    assert found.total_hits == len([i for i in range(3000) if i % 7 == 3])


async def test_the_daemon_starts_while_the_server_is_down_and_catches_up(
    pg: Any, tmp_path: Path, pg_server: Any, pg_index_dsn: str
) -> None:
    root = tmp_path / "notes"
    write(root / "a.md", "waiting words\n")
    d = pg("late", root)
    pg_server.stop()
    try:
        await d.start(wait_scan=False)
        async with d.client() as c:
            with pytest.raises(DaemonError) as caught:
                await c.search("waiting")
        assert caught.value.code == "unavailable"

        async def says_why() -> str:
            async with d.client() as c:
                return (await c.status()).index_error

        assert "cannot write the index" in await wait_for(says_why, timeout=20)
        doctor = d.kbctl("doctor").stdout
        assert "FAIL  the index cannot be reached" in doctor, doctor
    finally:
        pg_server.start()

    async def found() -> bool:
        try:
            return await d.search_paths("waiting") == ["a.md"]
        except DaemonError as exc:  # until its probe (every second) reached the server
            if exc.code != "unavailable":
                raise
            return False

    await wait_for(found, timeout=30, interval=0.2)
    doctor = d.kbctl("doctor").stdout
    assert "ok    shared index reachable, its schema and extensions in place" in doctor, doctor
    # An extension dropped under a running daemon: doctor names it.
    with psycopg.connect(pg_index_dsn, autocommit=True) as conn:
        conn.execute("DROP EXTENSION unaccent CASCADE")
    doctor = d.kbctl("doctor").stdout
    failed = f"FAIL  shared index: schema {schema.SCHEMA_VERSION}; missing extension(s): unaccent"
    assert failed in doctor, doctor


async def test_a_document_too_large_for_a_tsvector_is_indexed_by_its_start(
    pg: Any, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    # 2.2 MB of distinct words: PostgreSQL refuses a tsvector of more than 1 MB of lexemes,
    # which would fail the whole batch, and every file in it, at every scan.
    words = [hashlib.md5(str(i).encode()).hexdigest() for i in range(65_000)]
    write(root / "huge.txt", "openingword " + " ".join(words) + " closingword\n")
    write(root / "small.md", "an ordinary note\n")
    d = pg("big", root)
    await d.start()
    assert await d.search_paths("openingword") == ["huge.txt"]
    assert await d.search_paths("ordinary") == ["small.md"]
    async with d.client() as c:
        assert (await c.status()).index_error == ""
    found = await grep(d, Case("closingword"))  # grep reads the whole file
    assert [line.path for line in found.lines] == [str(root / "huge.txt")]


async def test_a_daemon_creates_nothing_and_says_which_command_makes_the_schema(
    pg: Any, tmp_path: Path, pg_server: Any
) -> None:
    pg_dsn = pg_server.dsn(pg_server.create_database())  # empty: no one ran db migrate
    root = tmp_path / "notes"
    write(root / "a.md", "words\n")
    d = pg("early", root)
    d.backend_args = ("--backend", "postgres", "--dsn", pg_dsn)  # an empty database
    proc = d.spawn()
    assert wait_exit(proc, timeout=30) == 2, d.log()
    assert f"the shared index has no schema yet: its owner runs `{schema.COMMAND}`" in d.log()
    with psycopg.connect(pg_dsn) as conn:  # not even as the superuser it connects as
        assert conn.execute("SELECT to_regnamespace('kbindex')").fetchone() == (None,)
    # A role that was granted nothing is told so, in one line.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS kbplain")
        conn.execute("CREATE ROLE kbplain LOGIN")
    plain = pg_dsn.replace("user=postgres", "user=kbplain")
    migrated = _kbindexd("db", "migrate", "--dsn", plain)
    assert migrated.returncode == 1, migrated
    assert "may not create the shared index's schema" in migrated.stderr
    assert _kbindexd("db", "migrate", "--dsn", pg_dsn).returncode == 0
    ungranted = pg("ungranted", root)
    ungranted.backend_args = ("--backend", "postgres", "--dsn", plain)
    proc = ungranted.spawn()
    assert wait_exit(proc, timeout=30) == 2, ungranted.log()
    assert "this PostgreSQL user may not read the shared index" in ungranted.log()


def _kbindexd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbindex.daemon.app", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


HOSTILE = [
    "",
    "   ",
    '"',
    '"unterminated phrase',
    "a AND (b",
    "NOT NOT NOT",
    "OR",
    "&|!():*<->",
    "'\\'",
    "x:*:*",
    "-",
    "--verbose",
    "*",
    "a" * 2000,
    "\x00\x01 nul",
    "東京\u200b都",
    "ß́̈́ café",
    "$$ $1 %s %(x)s {} ;DROP TABLE kb_files;--",
]


@pytest.mark.parametrize("mode", ["auto", "all", "any", "raw"])
async def test_hostile_queries_get_answers_or_clear_errors(
    pg: Any, tmp_path: Path, mode: str
) -> None:
    root = tmp_path / "notes"
    write(root / "a.md", "plain words about cafés and 東京都\n")
    d = pg("hostile", root)
    await d.start()
    async with d.client() as c:
        codes = {}
        for query in HOSTILE:
            try:
                await c.search(query, mode=mode)
            except DaemonError as exc:
                codes[query] = exc.code
        assert set(codes.values()) <= {"bad_query"}, codes
        assert [h.relpath for h in (await c.search("plain", mode=mode)).hits] == ["a.md"]
        # As in SQLite: accents folded, stop words kept, Porter's stemmer.
        assert [h.relpath for h in (await c.search("cafe", mode=mode)).hits] == ["a.md"]
        assert [h.relpath for h in (await c.search('"about cafés"', mode=mode)).hits] == ["a.md"]
    with psycopg.connect(d.backend_args[3]) as conn:
        assert conn.execute("SELECT count(*) FROM kb_files").fetchone() == (1,)


def test_settings_that_cannot_work_are_refused_at_start(tmp_path: Path) -> None:
    def start(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kbindex.daemon.app", "--state-dir", str(tmp_path / "s"),
             "--socket", str(tmp_path / "kb.sock"), *args],
            capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip

    no_dsn = start("--backend", "postgres", str(tmp_path))
    assert no_dsn.returncode == 2 and "needs a connection string" in no_dsn.stderr
    no_roots = start("--no-roots")
    assert no_roots.returncode == 2 and "use it with --backend postgres" in no_roots.stderr


def test_idf_is_fts5s_even_when_a_word_counts_more_documents_than_the_index(
    pg_dsn: str,
) -> None:
    """The document count is read before a word's postings: while the index grows, a word
    can count more documents than the count said. FTS5's idf is then 1e-6; ln() of a
    negative ratio had failed the whole search (InvalidArgumentForLogarithm, seen in CI)."""
    from kbindex.daemon.backends.postgres.reads import IDF

    with psycopg.connect(pg_dsn) as conn:
        idf = f"SELECT {IDF.format(df='%s::float8')}"
        for total, holding in ((5, 10), (10, 10), (10, 9)):
            assert conn.execute(idf, (total, holding, holding)).fetchone() == (1e-6,)
        rare = conn.execute(idf, (1000, 1, 1)).fetchone()
        assert rare is not None and abs(rare[0] - math.log((1000 - 1 + 0.5) / 1.5)) < 1e-9


FILLER = str.split(
    "lomet barvin cusk delph ernow fipple gandor hosk ilvar jemby kestrin lupo morvat nandle"
    " oskel pribb quendle rusko sapple tivvy umbral vostok wendle yarrow zumble"
)


def _filler(rng: random.Random, n: int, vocabulary: list[str] = FILLER) -> list[str]:
    return [rng.choice(vocabulary) for _ in range(n)]


def _past_the_limits(root: Path) -> None:
    """Documents whose ``tsvector`` loses positions (a word past 255 of them, words past
    position 16,383), next to ordinary ones."""
    rng = random.Random(21)
    common = _filler(rng, 2000)
    common[::5] = ["zork"] * 400  # "zork" 400 times; "zork plim" only after the 300th
    write(root / "common.txt", " ".join([*common, "zork plim", *_filler(rng, 20)]) + "\n")
    write(root / "short.txt", "a short note on zork plim and venzal\n")
    write(root / "vo.txt", "so vo and voing said on\n")  # porter: "voing" is "vo", as "vo" is
    long = _filler(rng, 20_000, FILLER[:12])  # few distinct words: each past 255 positions
    long[16_360:16_400] = ["venzal"] * 40  # ends where positions stop (16,383)...
    long[19_000] = "rair"  # ...so "venzal rair" would look adjacent there
    long[17_000:17_002] = ["quux", "blarg"]  # a phrase past position 16,383
    long[::97] = ["zork"] * len(long[::97])
    long[1000:4000:1000] = ["wembly"] * 3  # counted in a length capped by its words
    mid = _filler(rng, 3000)  # each word fewer than 255 times: no limit
    mid[500:1500:500] = ["wembly"] * 2
    write(root / "mid.txt", " ".join(mid) + "\n")
    write(root / "long.txt", " ".join(long) + "\n")
    some = _filler(rng, 300)
    some[::6] = ["zork"] * len(some[::6])
    write(root / "some.txt", " ".join([*some, "quux", "blarg"]) + "\n")
    often, apart = _filler(rng, 300), _filler(rng, 300)
    often[10:250:80] = ["gorp tann"] * 3  # the phrase three times
    apart[10:250:6] = ["gorp", "tann"] * 20  # its words often, the phrase once
    write(root / "often.txt", " ".join(often) + "\n")
    write(root / "apart.txt", " ".join([*apart, "gorp tann"]) + "\n")
    for i in range(12):  # documents without the query's words: its words' idf stays > 0
        write(root / f"filler-{i}.txt", " ".join(_filler(rng, 200 + 50 * i)) + "\n")


async def test_phrases_past_a_tsvectors_limits_find_what_sqlite_finds(
    pg: Any, tmp_path: Path, sockdir: Path
) -> None:
    root = tmp_path / "notes"
    _past_the_limits(root)
    (tmp_path / "lite").mkdir()
    lite = Daemon(tmp_path / "lite", sockdir, [root])
    shared_index = pg("big", root)
    queries = [
        '"zork plim"',  # past the 255th "zork" in common.txt
        '"quux blarg"',  # past position 16,383 in long.txt
        '"venzal rair"',  # apart in long.txt, adjacent once positions stop
        '"venzal venzal" -"quux blarg"',
        '"zork plim" note',
        'zork "quux blarg"',
        "zork",  # ranked by frequencies counted in full, as SQLite counts them
        "venzal",
        "wembly",  # in long.txt's full length, mid.txt ranks first
        '"gorp tann"',  # ranked by the phrase's frequency, as SQLite ranks it
        '"voing and"',
        '"vo said"',
        "ons",
    ]
    found = {}
    try:
        for d in (lite, shared_index):
            await d.start()
            async with d.client() as c:
                for q in queries:
                    r = await c.search(q, limit=100)
                    found[d, q] = (r.total_hits, [h.relpath for h in r.hits])
    finally:
        lite.stop()
    # (total, paths best first) on SQLite and on PostgreSQL, for each query that differs
    differ = {q: (found[lite, q], found[shared_index, q]) for q in queries}
    assert {q: pair for q, pair in differ.items() if pair[0] != pair[1]} == {}
    assert sorted(found[lite, '"zork plim"'][1]) == ["common.txt", "short.txt"]
    assert found[lite, '"quux blarg"'][0] == 2
    assert found[lite, '"venzal rair"'] == (0, [])
    assert found[lite, "zork"][0] == 4
    assert found[lite, "wembly"] == (2, ["mid.txt", "long.txt"])
    assert found[lite, '"gorp tann"'] == (2, ["often.txt", "apart.txt"])
    assert found[lite, '"voing and"'] == found[lite, '"vo said"'] == (1, ["vo.txt"])


def test_schema_2_marks_the_limited_documents_of_a_version_1_database(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION unaccent")
        conn.execute(schema.MIGRATIONS[1])
        conn.execute("CREATE TABLE kb_meta(key text PRIMARY KEY, value text)")
        conn.execute("INSERT INTO kb_meta VALUES ('schema', '1')")
        past = " ".join(f"word{n}" for n in range(17_000))  # positions stop at 16,383
        for i, text in enumerate(["zork " * 300, "a short note", past], 1):
            conn.execute(
                "INSERT INTO kb_files(id, machine, path, root, relpath, size, mtime_ns,"
                " indexed_at, ctime_ns, ino, dev) VALUES (%s, 'm', %s, '/r', %s, 1, 7, 0, 0, 0, 0)",
                (i, f"/r/{i}.txt", f"{i}.txt"),
            )
            conn.execute(
                "INSERT INTO kb_docs VALUES (%s, '', %s, 0, to_tsvector('kb_words', %s), '', '')",
                (i, text, text),
            )
        schema.migrate(conn, upto=4)  # v5 has every file read again (issue 41)
        conn.execute(f"SET search_path = {schema.NAMESPACE}")
        rows = conn.execute(
            "SELECT f.relpath, d.limited, f.mtime_ns FROM kb_files f JOIN kb_docs d USING (id)"
            " ORDER BY 1"
        ).fetchall()
        version = conn.execute("SELECT value FROM kb_meta WHERE key = 'schema'").fetchone()
        # Where a kbindexd of before looks: it stops ("newer"), and makes no tables there.
        older = conn.execute("SELECT value FROM public.kb_meta WHERE key = 'schema'").fetchone()
    assert older == (str(schema.SCHEMA_VERSION),)
    # The limited ones are read again at the next scan (their mtime no longer matches).
    assert rows == [("1.txt", True, -1), ("2.txt", False, 7), ("3.txt", True, -1)]
    assert version == ("4",)


# ------------------------------------------------ each daemon deletes only its own rows


def _rows(dsn: str) -> dict[str, int]:
    """Files per machine, as the database holds them now (status counts lag by design)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT machine, count(*) FROM kb_files GROUP BY 1").fetchall()
    return dict(rows)


async def test_a_reader_with_the_writers_machine_name_deletes_nothing(
    pg: Any, pg_index_dsn: str, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    for i in range(5):
        write(root / f"n{i}.md", f"lantern note {i}\n")
    writer = pg("writer", root, machine="host")
    await writer.start()
    reader = pg("reader", machine="host")
    await reader.start()
    await reader.refresh()
    assert _rows(pg_index_dsn) == {"host": 5}
    assert len(await reader.search_paths("lantern")) == 5


async def test_a_second_daemon_with_a_live_machine_name_is_refused_and_deletes_nothing(
    pg: Any, pg_index_dsn: str, tmp_path: Path
) -> None:
    first_root, second_root = tmp_path / "first", tmp_path / "second"
    write(first_root / "a.md", "alpha words\n")
    write(first_root / "b.md", "alpha more\n")
    write(second_root / "c.md", "gamma words\n")
    first = pg("first", first_root, machine="host")
    await first.start()
    second = pg("second", second_root, machine="host")
    await second.start(wait_scan=False)

    async def refused() -> str:
        async with second.client() as c:
            return (await c.status()).index_error

    error = await wait_for(refused, timeout=20)
    assert "machine 'host' is written by another kbindexd" in error, error
    await first.refresh()
    assert _rows(pg_index_dsn) == {"host": 2}
    assert sorted(await second.search_paths("alpha")) == ["a.md", "b.md"]
    assert await first.search_paths("gamma") == []


async def test_a_server_logging_every_statement_logs_no_document_text(
    pg: Any, tmp_path: Path, pg_server: Any, pg_index_dsn: str
) -> None:
    database = psycopg.conninfo.conninfo_to_dict(pg_index_dsn)["dbname"]
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        # The slow-statement log at its most: every statement, with its parameters.
        conn.execute(f"ALTER DATABASE {database} SET log_min_duration_statement = 0")
    root = tmp_path / "notes"
    write(root / "secret.md", "# Plans\nthe quarterly zyxwvutsecret figures\n")
    d = pg("logged", root)
    await d.start()
    assert await d.search_paths("zyxwvutsecret") == ["secret.md"]
    logged = pg_server.log_path.read_text(errors="replace")
    assert "quarterly" not in logged  # the document's text is not logged
    assert "INSERT INTO kb_docs" in logged  # the batch's statement is
    assert "zyxwvutsecret" in logged  # and the search's words, a query's parameter


def test_a_config_file_holding_a_dsn_is_refused_when_others_may_change_or_read_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir(mode=0o700)

    def start() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kbindex.daemon.app", "--config", str(config),
             "--state-dir", str(tmp_path / "s"), "--socket", str(tmp_path / "kb.sock")],
            capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip

    config.write_text('backend = "postgres"\ndsn = "postgresql://kb@db.example/kbindex"\n')
    config.chmod(0o664)  # the group may point the daemon at a server of theirs
    changed = start()
    assert changed.returncode == 2, changed
    assert f"refusing the config file {config}: {config} is writable by its group" in (
        changed.stderr
    )
    config.chmod(0o600)
    config.parent.chmod(0o777)  # or replace the file
    moved = start()
    assert moved.returncode == 2 and f"{config.parent} is writable by others" in moved.stderr
    config.parent.chmod(0o700)
    config.write_text('backend = "postgres"\ndsn = "postgresql://kb:s3cret@db.example/kb"\n')
    config.chmod(0o644)
    read = start()
    assert read.returncode == 2
    assert "readable by others (mode 644) and its dsn holds a password" in read.stderr
    assert "s3cret" not in read.stderr
    # Without a password, readable is fine: the daemon goes on (to a server that is not
    # there: it starts anyway, so the check is the settings').
    from kbindex.daemon import settings

    config.write_text('backend = "postgres"\ndsn = "postgresql://kb@db.example/kb"\n')
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser, tuple(BACKENDS))
    args = parser.parse_args(["--config", str(config), "--state-dir", str(tmp_path / "s")])
    assert settings.load(args, environ={}).dsn == "postgresql://kb@db.example/kb"


@pytest.mark.timeout(180)
async def test_a_frozen_daemons_lease_runs_out_and_it_writes_nothing_after(
    pg: Any, pg_index_dsn: str, tmp_path: Path
) -> None:
    from kbindex.daemon.backends.postgres.machines import LEASE_SECONDS

    root = tmp_path / "notes"
    write(root / "a.md", "first words\n")
    first = pg("first", root, machine="host")
    await first.start()
    assert first.proc is not None
    first.proc.send_signal(signal.SIGSTOP)  # a host that froze: its connections stay open
    try:
        write(root / "b.md", "second words\n")
        second = pg("second", root, machine="host")
        started = time.monotonic()
        await second.start(wait_scan=False)

        async def taken_over() -> bool:
            return await second.search_paths("second") == ["b.md"]

        await wait_for(taken_over, timeout=LEASE_SECONDS + 30, interval=0.5)
        assert time.monotonic() - started >= LEASE_SECONDS - 10  # not before it ran out
    finally:
        first.proc.send_signal(signal.SIGCONT)
    # The first one wakes up and writes nothing more: its lease is gone.
    (root / "a.md").unlink()
    with pytest.raises(DaemonError) as refused:
        await first.refresh(full=True)
    assert "machine 'host' is written by another kbindexd" in str(refused.value)
    assert sorted(await second.search_paths("words")) == ["a.md", "b.md"]


@pytest.mark.timeout(180)
async def test_answers_say_which_machines_are_behind_or_gone_and_kbctl_retires_one(
    pg: Any, tmp_path: Path
) -> None:
    from kbindex.daemon.backends.postgres.machines import LEASE_SECONDS

    LATE_SECONDS = LEASE_SECONDS / 2

    alpha_root, beta_root = tmp_path / "alpha-notes", tmp_path / "beta-notes"
    write(alpha_root / "lanterns.md", "the lantern festival\n")
    write(beta_root / "kites.md", "the kite festival\n")
    write(beta_root / "more.md", "another festival\n")
    alpha, beta, reader = pg("alpha", alpha_root), pg("beta", beta_root), pg("reader")
    for d in (alpha, beta, reader):
        await d.start()

    async def fresh(want: tuple[list[str], list[str]]) -> bool:
        async with reader.client() as c:
            f = (await c.search("festival")).freshness
        return f is not None and (f.machines_behind, f.machines_gone) == want

    await wait_for(lambda: fresh(([], [])), timeout=15, interval=0.5)
    listed = reader.kbctl("machines").stdout
    assert "alpha: live, 1 files, heartbeat" in listed and "beta: live, 2 files" in listed
    # A daemon that stops gives its lease back: its machine is gone, its rows still served.
    beta.stop()
    await wait_for(lambda: fresh(([], ["beta"])), timeout=15, interval=0.5)
    assert "beta: gone, 2 files" in reader.kbctl("machines").stdout
    # A daemon that froze is behind, once its heartbeat is late.
    assert alpha.proc is not None
    alpha.proc.send_signal(signal.SIGSTOP)
    try:
        await wait_for(lambda: fresh((["alpha"], ["beta"])), timeout=LATE_SECONDS + 20)
    finally:
        alpha.proc.send_signal(signal.SIGCONT)
    await wait_for(lambda: fresh(([], ["beta"])), timeout=20, interval=0.5)
    # A live machine is not retired; a gone one is, with its rows.
    live = reader.kbctl("machines", "retire", "alpha")
    assert live.returncode == 1 and "machine 'alpha' is live" in live.stderr, live
    retired = reader.kbctl("machines", "retire", "beta")
    assert retired.returncode == 0, retired
    assert "machine 'beta' retired: 2 files removed" in retired.stdout
    assert await reader.search_paths("festival") == ["lanterns.md"]
    await wait_for(lambda: fresh(([], [])), timeout=15, interval=0.5)
    assert "beta" not in reader.kbctl("machines").stdout
    unknown = reader.kbctl("machines", "retire", "nowhere")
    assert unknown.returncode == 1 and "no machine 'nowhere'" in unknown.stderr


async def test_a_schema_upgraded_under_a_running_daemon_gets_no_write_and_doctor_says_so(
    pg: Any, pg_index_dsn: str, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    write(root / "a.md", "first words\n")
    d = pg("running", root)
    await d.start()
    with psycopg.connect(pg_index_dsn, autocommit=True) as conn:  # a newer kbindexd's owner
        conn.execute("UPDATE kb_meta SET value = %s WHERE key = 'schema'", (str(99),))
    write(root / "b.md", "second words\n")
    with pytest.raises(DaemonError) as refused:
        await d.refresh()
    assert "the shared index's schema is now version 99" in str(refused.value)
    assert _rows(pg_index_dsn) == {"running": 1}  # the batch wrote nothing
    doctor = d.kbctl("doctor").stdout
    assert "schema version 99, newer than this kbindexd" in doctor, doctor
