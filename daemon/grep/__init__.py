"""grep: ``trigrams`` turns a pattern into the trigrams every match holds, ``phrases`` a
literal into the phrases of its whole words (``narrowing`` asks both, and names the
changes not indexed yet), the backend finds the files they admit,
``grepper`` runs ``ripgrep`` (the only module that knows ripgrep) over them; ``sweep``
lets ripgrep walk the directories when every file is a candidate.
"""
