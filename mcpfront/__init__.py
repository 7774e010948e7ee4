"""kbindex-mcp, the MCP front end of kbindex (see app.py)."""

import os

LAUNCHED_BY = os.getppid()
"""The parent process id, read as early as possible: the heavy imports that follow take
most of a second, and a parent that dies during them must still be noticed (app.py)."""
