"""A PostgreSQL connection string read without connecting: is its server reached over
TCP? The daemon asks to tell a sandbox that forbids TCP from a server that is down;
``kbctl service install`` asks to let the unit's sandbox allow TCP.

psycopg is the ``postgres`` extra: it is imported here only when asked.
"""

from __future__ import annotations

import os


def over_tcp(dsn: str) -> bool:
    """Whether libpq reaches the server over TCP: a ``hostaddr``, or a host that is
    not a directory (no host at all means the default Unix socket)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # without the extra, the daemon refuses the backend and says so
        return False
    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # an invalid string: the connection fails with libpq's reason
        return False
    if params.get("hostaddr"):
        return True
    hosts = str(params.get("host") or os.environ.get("PGHOST") or "")
    return any(h and not h.startswith(("/", "@")) for h in hosts.split(","))
