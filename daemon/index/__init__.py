"""The index as the rest of the daemon sees it: the interface every backend implements
(``interface``), and the announcement of each write the indexer commits (``commits``)."""
