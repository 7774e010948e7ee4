"""What a path filter names: one rule for search, grep and find_files, and a notice
when it names nothing.

A filter is a folder (``notes/``, ``docs/api``) or a glob (``docs/*.md``, ``**/*.py``;
``*`` also crosses ``/``), relative to a root or absolute; ``searcher.path_filter``
turns it into SQL for every backend, and ``sweep`` into the folders ripgrep walks.
Relative to a root also means from the folder that holds the root: where no file
matches the filter inside the roots and its first folder is a root's own name,
the filter is taken inside that root. So ``notes/`` finds the files of the root
``/home/me/notes``, as a person or an agent who sees that root listed means it.

The check costs nothing when a filter finds something: only an answer with no match
asks the index whether the filter names any file at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from kbindex.daemon.roots import Roots

T = TypeVar("T")
_GLOB_CHARS = frozenset("*?[")
_EVERYTHING = "*"


class Scopes:
    def __init__(self, roots: Roots, names_a_file: Callable[[str], Awaitable[bool]]) -> None:
        self.roots = roots
        self.names_a_file = names_a_file
        """Whether the index holds a file that a filter admits."""

    async def answer(
        self,
        raw: str | None,
        run: Callable[[str | None], Awaitable[T]],
        found: Callable[[T], int],
    ) -> tuple[T, list[str], str | None]:
        """``run`` with the filter ``raw`` as this module reads it, the notices for the
        reply (one when the filter names no indexed file), and the filter that named
        files (``raw``, or ``raw`` inside a root), None when none did."""
        reply = await run(raw)
        if not raw or not raw.strip():
            return reply, [], None
        if found(reply) or await self.names_a_file(raw):
            return reply, [], raw
        for inside in self.within_named_root(raw):
            if await self.names_a_file(inside):
                return await run(inside), [], inside
        if not await self.names_a_file(_EVERYTHING):
            return reply, [], None  # nothing is indexed at all: status says so
        return reply, [self.notice(raw)], None

    def within_named_root(self, raw: str) -> list[str]:
        """``raw`` taken inside each root whose own name is its first folder, as an
        absolute filter; none for an absolute filter or a glob in the first folder."""
        text = raw.strip().removeprefix("./")
        first, _, rest = text.partition("/")
        if not first or text.startswith("/") or _GLOB_CHARS & set(first):
            return []
        return [f"{root}/{rest}" for root in self.roots.paths if root.name == first]

    def notice(self, raw: str) -> str:
        roots = ", ".join(str(r) for r in self.roots.paths) or "none"
        return (
            f"the path filter {raw!r} matches no indexed file or folder: give a folder"
            " ('docs/') or a glob ('docs/*.md', '**/*.py'), relative to a root or"
            f" absolute (roots: {roots})"
        )
