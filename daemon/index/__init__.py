"""The index as the rest of the daemon sees it, and the seam every backend plugs into:
``interface`` (the ``Index`` protocol and the errors that cross it) and ``values``
(everything that crosses it). It imports nothing else of the daemon."""
