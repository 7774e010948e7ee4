"""The index as the rest of the daemon sees it: the interface every backend implements
(``interface``) and the query plan each one renders in its own syntax (``plan``)."""
