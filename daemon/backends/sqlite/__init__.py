"""The default index: one SQLite file in the state directory, written by this daemon alone.

``index`` is the backend (``SqliteIndex``); ``schema`` holds the tables, ``documents``
writes documents into them, ``store`` the writer connection and the index's life (built
again beside an older or damaged file, which is moved aside), ``database`` the file
itself, ``readers`` the pool of search connections, ``checkpointer`` copies the
log back beside the writer; ``render`` writes a query plan as FTS5 MATCH pieces,
``searcher`` ranks with bm25 (``prefixes``, ``frequency``
and ``essential`` shape the FTS5 query), ``candidates`` finds the files a grep may
match. The SQLite library itself is the daemon's (``kbindex.daemon.engine``).
"""
