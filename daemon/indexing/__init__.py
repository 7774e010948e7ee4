"""Indexing: how a file on disk becomes rows of the index.

``indexer`` runs a refresh: ``scanner`` walks and stats (``ignore`` decides what is
left out), the signatures are compared with what the index holds, ``textfile`` reads
and decodes what changed (``titles`` names it by its kind of file), ``documents``
(with ``tokens`` for the derived columns and ``grams`` for grep's trigrams) prepares
the rows and writes them through ``storage.store``; ``structure`` adds what a text
holds besides its words (``frontmatter``: fields, tags, dates; ``links``), and ``kinds``
names each file's kind from its path.
"""
