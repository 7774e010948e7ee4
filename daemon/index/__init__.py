"""The index as the rest of the daemon sees it: the interface every backend implements."""
