"""Searching: how a query becomes hits.

``query`` turns what was typed into a plan (``index.plan``), the backend ranks it,
``hits`` shows each hit: ``passages`` finds its line and snippet (the words marked where
they match, by ``stems``, the index's own stemmer) in its text, which ``texts`` reads
(the one reader of a file's text for clients); ``explanation`` says why a path is or is not indexed;
``filters`` reads the filters on what files hold (kind, tag, field, dates, scope)
into ``index.plan.Filters``.
"""
