"""Search by meaning: passages embedded by a local model, beside the word index.

Optional (``pip install 'kbindex[semantic]'``): without the extra, or with
``semantic = "off"``, nothing here imports the model's runtime and search is lexical.
``hybrid`` fuses the word ranking with the nearest passages (``meaning`` runs it).
"""
