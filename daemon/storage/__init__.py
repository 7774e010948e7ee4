"""Storage: the one SQLite file and its one writer.

``schema`` holds the tables and migrations, ``store`` the writer connection and the
move-aside of a damaged file, ``readers`` the pool of search connections,
``checkpointer`` copies the log back beside the writer, ``recovery`` rebuilds the index
when damage shows while serving.
"""
