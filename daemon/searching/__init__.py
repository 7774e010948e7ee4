"""Searching: how a query becomes hits.

``query`` turns what was typed into a plan (``index.plan``), the backend ranks it,
``passages`` finds each hit's line and snippet (the words marked where they match, by
``stems``, the index's own stemmer); ``explanation`` says why a path is or is not indexed;
``filters`` reads the filters on what files hold (kind, tag, field, dates, scope)
into ``index.plan.Filters``.
"""
