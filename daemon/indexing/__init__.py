"""Indexing: how a file on disk becomes rows of the index.

``indexer`` runs a refresh: ``scanner`` walks and stats (``ignore`` decides what is
left out), the signatures are compared with what the index holds, ``textfile`` reads
and decodes what changed (``titles`` names it by its kind of file), ``documents``
(with ``tokens`` for the derived columns and ``grams`` for grep's trigrams) prepares
each document, and the indexer hands them to the index (``index.Index.apply``); no SQL
here, the backend writes them its own way.
"""
