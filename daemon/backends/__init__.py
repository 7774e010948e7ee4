"""The index backends, one folder each: ``sqlite`` (the default) and ``postgres`` (the
``postgres`` extra). Each holds all of its SQL, schema and connections; the rest of the
daemon sees only ``kbindex.daemon.index``."""
