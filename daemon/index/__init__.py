"""The index as the rest of the daemon sees it, and the seam every backend plugs into:
``interface`` (the ``Index`` protocol and the errors that cross it) and ``values``
(everything that crosses it), and ``plan``, the neutral query plan each backend renders
in its own syntax, and ``commits``, the announcement of each write the indexer commits.
It imports nothing else of the daemon."""
