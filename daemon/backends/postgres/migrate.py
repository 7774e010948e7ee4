"""``kbindexd db``: the shared index's owner creates or upgrades its schema.

Daemons create nothing (their roles need no CREATE anywhere): the role that is to own the
schema runs ``kbindexd db migrate`` once, and again after an upgrade of kbindex that
says so. docs/postgres.md gives the roles' SQL.
"""

from __future__ import annotations

import argparse
import os
import sys

import psycopg
from kbindex.daemon.backends.postgres import connections, schema
from kbindex.daemon.index.interface import IndexRefused


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kbindexd db",
        description="Manage the schema of a shared PostgreSQL index, as its owner.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    migrate = commands.add_parser(
        "migrate", help="create the schema, or bring it to this kbindexd's version"
    )
    migrate.add_argument(
        "--dsn",
        metavar="URL",
        help="connection string of the owner role (default: $KBINDEX_DSN)",
    )
    args = parser.parse_args(argv)
    dsn = args.dsn or os.environ.get("KBINDEX_DSN", "")
    if not dsn:
        print("kbindexd db: give --dsn URL or KBINDEX_DSN", file=sys.stderr)  # noqa: T201
        return 2
    try:
        with connections.connect(dsn, role="owner") as conn:
            before, after = schema.migrate(conn)
    except (psycopg.Error, IndexRefused) as exc:
        print(f"kbindexd db: {str(exc).strip()}", file=sys.stderr)  # noqa: T201
        return 1
    done = "is already at" if before == after else f"went from {before or 'nothing'} to"
    print(f"the shared index's schema {schema.NAMESPACE} {done} version {after}")  # noqa: T201
    return 0
