"""Notes: ``notes`` changes notes in writable roots, ``notefile`` reaches each one from
the root's own directory without following a link."""
