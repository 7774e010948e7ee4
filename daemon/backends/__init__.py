"""The index backends, one folder each: ``sqlite`` (the default) and ``postgres`` (the
``postgres`` extra). Each holds all of its SQL, schema and connections; the rest of the
daemon sees only ``kbindex.daemon.index``, and only the composition root (``app``)
loads a backend, by the name the settings give; ``app`` hands the names of ``BACKENDS``
to the settings, the one list of them.

A third backend is a folder beside these and a line in ``BACKENDS``: its class takes
its place in ``configured`` and implements ``index.Index``. A backend imports nothing
of the daemon but ``index`` and ``engine``: it is handed finished rows, and what it
needs done with files (a moved file's rows, a file's text) is done above it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final, Protocol, cast

if TYPE_CHECKING:
    from pathlib import Path

    from kbindex.daemon.index.interface import Index, Texts

BACKENDS: Final = {
    "sqlite": "kbindex.daemon.backends.sqlite.index:SqliteIndex",
    "postgres": "kbindex.daemon.backends.postgres.index:PgIndex",
}
"""A backend's name (``--backend``) and its class, as ``module:Class``."""


class Settings(Protocol):
    """What a backend reads of the daemon's settings (``settings.Settings``)."""

    @property
    def db_path(self) -> Path: ...
    @property
    def dsn(self) -> str: ...
    @property
    def machine(self) -> str: ...
    @property
    def pg_timeout_seconds(self) -> float: ...
    @property
    def pg_lease_seconds(self) -> float: ...


class Backend(Protocol):
    """A backend's class: builds its index from the settings."""

    def configured(self, settings: Settings, texts: Texts) -> Index:
        """The index the settings describe; ``texts``: how a backend that keeps no text
        reads an indexed file's."""
        ...


def load(name: str) -> Backend:
    """The class of the backend ``name``; imported only now, since a backend may need
    an extra that is not installed (ImportError)."""
    module, _, attribute = BACKENDS[name].partition(":")
    return cast("Backend", getattr(importlib.import_module(module), attribute))
