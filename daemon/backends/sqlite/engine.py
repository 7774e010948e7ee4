"""The SQLite library of the daemon (``kbindex.daemon.engine``), as this backend's modules
import it."""

from kbindex.daemon.engine import sqlite as sqlite
