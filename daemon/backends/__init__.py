"""The index backends, one folder each: ``sqlite`` (the default) and ``postgres`` (the
``postgres`` extra). Each holds all of its SQL, schema and connections; the rest of the
daemon sees only ``kbindex.daemon.index``, and only the composition root (``app``)
loads a backend, by the name the settings give (``settings.BACKENDS``).

A third backend is a folder beside these and a line in ``BACKENDS``: its class takes
its place in ``configured`` and implements ``index.Index``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final, Protocol, cast

if TYPE_CHECKING:
    from kbindex.daemon.index.interface import Index
    from kbindex.daemon.indexing.kinds import Classifier
    from kbindex.daemon.roots import Roots
    from kbindex.daemon.settings import Settings

BACKENDS: Final = {
    "sqlite": "kbindex.daemon.backends.sqlite.index:SqliteIndex",
    "postgres": "kbindex.daemon.backends.postgres.index:PgIndex",
}
"""A backend's name (``--backend``) and its class, as ``module:Class``."""


class Backend(Protocol):
    """A backend's class: builds its index from the settings."""

    def configured(self, settings: Settings, roots: Roots, kinds: Classifier) -> Index:
        """The index the settings describe; ``roots`` are the only place a backend
        that keeps no text reads files from; ``kinds`` names each file's kind (and
        their boosts in ranking)."""
        ...


def load(name: str) -> Backend:
    """The class of the backend ``name``; imported only now, since a backend may need
    an extra that is not installed (ImportError)."""
    module, _, attribute = BACKENDS[name].partition(":")
    return cast("Backend", getattr(importlib.import_module(module), attribute))
