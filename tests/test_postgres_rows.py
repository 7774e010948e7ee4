"""On a shared PostgreSQL index each daemon deletes only rows under the roots it writes,
whatever machine name it shares with another daemon (a second daemon on the host, a
``--no-roots`` reader started with the host's default name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import write
from test_postgres import shared

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def pg(pg_dsn: str, tmp_path: Path) -> Any:
    started = []

    def make(name: str, *roots: Path, machine: str = "") -> Any:
        d = shared(tmp_path, name, pg_dsn, *roots, machine=machine)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()


def _rows(dsn: str) -> dict[str, int]:
    """Files per machine, as the database holds them now (status counts lag by design)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT machine, count(*) FROM kb_files GROUP BY 1").fetchall()
    return dict(rows)


async def test_a_reader_with_the_writers_machine_name_deletes_nothing(
    pg: Any, pg_dsn: str, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    for i in range(5):
        write(root / f"n{i}.md", f"lantern note {i}\n")
    writer = pg("writer", root, machine="host")
    await writer.start()
    reader = pg("reader", machine="host")
    await reader.start()
    await reader.refresh()
    assert _rows(pg_dsn) == {"host": 5}
    assert len(await reader.search_paths("lantern")) == 5


async def test_two_daemons_sharing_a_machine_name_keep_each_others_rows(
    pg: Any, pg_dsn: str, tmp_path: Path
) -> None:
    first_root, second_root = tmp_path / "first", tmp_path / "second"
    write(first_root / "a.md", "alpha words\n")
    write(first_root / "b.md", "alpha more\n")
    write(second_root / "c.md", "gamma words\n")
    first = pg("first", first_root, machine="host")
    await first.start()
    second = pg("second", second_root, machine="host")
    await second.start()
    # Each one's scans leave the other's rows as they are, again and again.
    for _ in range(2):
        await second.refresh()
        await first.refresh()
    assert _rows(pg_dsn) == {"host": 3}
    assert sorted(await second.search_paths("alpha")) == ["a.md", "b.md"]
    assert await first.search_paths("gamma") == ["c.md"]
    # A file deleted from one root still leaves its row (and only its row).
    (first_root / "b.md").unlink()
    await first.refresh()
    assert await second.search_paths("alpha") == ["a.md"]
    assert await second.search_paths("gamma") == ["c.md"]
