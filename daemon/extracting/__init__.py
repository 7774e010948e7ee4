"""Documents (PDF, Office, OpenDocument, HTML, EPUB) made into text, outside the daemon.

Each document is read in a worker process under limits on CPU time, memory, wall-clock
time and output (``workers``, ``worker``); what it gives, text or the reason it gave none,
is kept by the sha256 of the file's bytes (``cache``), so that a rescan, a restart, a
rename or a copy never reads it again. ``formats`` tells a document by its name and first
bytes and needs nothing installed; the readers (``pdf``, ``office``, ``opendocument``,
``webpage``, ``epub``) run only in the worker and need the extra ``kbindex[documents]``.

A document's text carries its pages: each page after the first begins with a form feed
(``\\f``) at the start of a line, the convention of pdftotext and ripgrep-all (``pages``).
"""
