"""A request's filters on what files hold (issue 41): the ``plan.Filters`` it asks for,
the roots' names and descriptions behind ``scope``, and a note for each filter that no
indexed file passes.

A filter value that cannot be read fails the request (``filters.BadFilter``, a
``bad_filter``); one that can but leaves nothing gets a note, looked for only when an
answer is empty, so a filtered answer that finds something costs nothing more.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Final

from kbindex.daemon.index.plan import NO_FILTERS, Filters, PathFilter
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import filters
from kbindex.daemon.settings import Settings, half_life
from kbindex.proto.messages import Filtered

DEFAULT_HALF_LIFE: Final = 90 * 86400.0
"""The half-life of ``recent = "on"`` where the configuration sets none."""


class Filtering:
    def __init__(
        self,
        roots: Roots,
        settings: Callable[[], Settings],
        passes: Callable[[Filters], Awaitable[bool]],
    ) -> None:
        self.roots = roots
        self.settings = settings
        self.passes = passes
        """Whether an indexed file passes the filters."""

    def named(self) -> dict[str, str]:
        """Each root's scope name (``name`` in its configuration, else its folder's
        name) and its path; a folder name two roots share names neither, and a name
        given in the configuration wins over another root's folder name."""
        return self._names()[0]

    def _names(self) -> tuple[dict[str, str], set[str]]:
        """``named``, and the folder names two unnamed roots share."""
        settings = self.settings()
        given = {root: settings.options_for(root).name for root in self.roots.paths}
        names = {name: str(root) for root, name in given.items() if name}
        folders = Counter(root.name for root, name in given.items() if not name)
        for root, name in given.items():
            if not name and folders[root.name] == 1 and root.name not in names:
                names[root.name] = str(root)
        return names, {f for f, n in folders.items() if n > 1 and f not in names}

    def descriptions(self) -> Callable[[str, str], str]:
        """The description of a file by its root and its path relative to it: that of
        the deepest folder holding it that has one, else its root's ("" for none)."""
        settings = self.settings()
        roots: dict[str, tuple[str, dict[str, str]]] = {}
        for root in self.roots.paths:
            options = settings.options_for(root)
            roots[str(root)] = (options.description, dict(options.folders))

        def of(root: str, relpath: str) -> str:
            described, folders = roots.get(root, ("", {}))
            folder = relpath
            while folders and "/" in folder:
                folder = folder.rsplit("/", 1)[0]
                if folder in folders:
                    return folders[folder]
            return described

        return of

    def recency(self, asked: str) -> float:
        """The half-life of a search's preference for recent files (``Search.recent``;
        0: none); raises ``filters.BadFilter``."""
        setting = self.settings().recency_half_life
        asked = asked.strip().lower()
        if not asked:
            return setting
        if asked == "off":
            return 0.0
        if asked == "on":
            return setting or DEFAULT_HALF_LIFE
        try:
            return half_life(asked, "recent")
        except ValueError as exc:
            raise filters.BadFilter(str(exc)) from None

    def of(self, request: Filtered) -> Filters:
        """The filters of ``request``; raises ``filters.BadFilter``."""
        if not (
            request.kind
            or request.tag
            or request.field
            or request.modified is not None
            or request.date
            or request.scope
        ):
            return NO_FILTERS
        named, shared = self._names() if request.scope else ({}, set())
        return filters.build(
            kinds=request.kind,
            tags=request.tag,
            fields=request.field,
            modified=request.modified,
            dates=request.date,
            scopes=request.scope,
            named=named,
            shared=shared,
            now=time.time(),
        )

    async def unmatched(self, given: Filters, path: str | None = None) -> list[str]:
        """A note for each filter of ``given`` that no indexed file passes alone, or
        one for all of them when each does but not together, or for them and the path
        filter ``path`` (one that names indexed files) when no file passes both."""
        if not given.structured:
            return []
        singles: list[tuple[str, Filters]] = []
        singles += [(f"root {r}", Filters(roots=(r,))) for r in given.roots]
        singles += [(f"kind {k!r}", Filters(kinds=(k,))) for k in given.kinds]
        singles += [(f"tag {t!r}", Filters(tags=(t,))) for t in given.tags]
        singles += [(f"field {k}={v}", Filters(fields=((k, v),))) for k, v in given.fields]
        if given.modified is not None:
            singles.append(("its modified time in that span", Filters(modified=given.modified)))
        for dated in given.dated:
            what = f"a front matter {dated.key + ' ' if dated.key else ''}date in that span"
            singles.append((what, Filters(dated=(dated,))))
        notes = []
        for what, one in singles:
            if not await self.passes(one):
                notes.append(
                    f"no indexed file has {what}"
                    if what[:4] != "root"
                    else f"no indexed file is in {what}"
                )
        if notes:
            return notes
        if len(singles) > 1 and not await self.passes(given):
            return ["no indexed file passes all of these filters together"]
        if path and not await self.passes(replace(given, path=PathFilter.parse(path))):
            return [f"no indexed file that the path filter {path!r} names passes these filters"]
        return []
