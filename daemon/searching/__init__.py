"""Searching: how a query becomes SQL and a list of hits.

``query`` turns what was typed into a typed expression (``Expr``), ``prefixes``
resolves prefix terms on the unstemmed index, ``frequency`` leaves out words too common
to choose by, ``essential`` picks the words whose documents are ranked first,
``searcher`` ranks with bm25 in one place, ``passages`` finds each hit's line and
snippet (the words marked where they match, by ``stems``, the index's own stemmer);
``explanation`` says why a path is or is not indexed.

grep: ``trigrams`` turns a pattern into the trigrams every match holds, ``phrases`` a
literal into the phrases of its whole words, ``candidates`` finds the files they
admit, ``grep`` runs ``ripgrep`` over them; ``sweep`` lets ripgrep walk the directories
when every file is a candidate.
"""
