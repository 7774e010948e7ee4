"""Indexing: how a file on disk becomes rows of the index.

``indexer`` runs a refresh: ``scanner`` walks and stats (``ignore`` decides what is
left out), the signatures are compared with what the index holds, ``textfile`` reads
and decodes what changed (``titles`` names it by its kind of file), ``documents``
(with ``tokens`` for the derived columns and ``grams`` for grep's trigrams) prepares
each document (``structure`` adds what a text holds besides its words: ``frontmatter``
for fields, tags and dates, ``links``; ``kinds`` names each file's kind from its path),
and the indexer hands them to the index (``index.Index.apply``); no SQL here, the
backend writes them its own way.
"""
