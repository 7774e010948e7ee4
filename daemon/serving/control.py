"""Changing what the daemon indexes while it runs: roots added and removed
(``kbctl roots add|remove``) and settings re-read on SIGHUP.

A change of roots is written where the roots came from, so that reloads and restarts
keep it: the config file when the daemon took its roots from there, else (roots on
the command line or in KBINDEX_ROOTS) the record in the state directory that
root_changes.py lays over them.

Every change holds one lock, so two of them never interleave, and leaves the roots, the
ignore rules, the watches and the index agreeing; the roots it touches are then
reconciled, so files newly ignored leave the index and newly allowed ones join it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
from kbindex.daemon import config_file, root_changes
from kbindex.daemon.health import Health, RootRemoved
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.indexing.kinds import Classifier
from kbindex.daemon.roots import Roots
from kbindex.daemon.serving.notify import Notifier
from kbindex.daemon.settings import Settings, SettingsError, check_root, default_config_path
from kbindex.daemon.watching.changes import Changes
from kbindex.daemon.watching.watcher import Watcher

log = logging.getLogger(__name__)


class BadRoot(Exception):
    """A root to add or remove is refused: why is in the message."""


class ConfigRefused(Exception):
    """A reload found the configuration invalid (or not in force at all): why."""


@dataclass(frozen=True)
class Changed:
    """What a root added or removed did, for the reply."""

    message: str
    recorded_in: Path
    """The config file, or the state directory's record (root_changes.py)."""


class Control:
    def __init__(
        self,
        settings: Settings,
        roots: Roots,
        indexer: Indexer,
        health: Health,
        changes: Changes,
        watcher: Watcher,
        *,
        reread: Callable[[], Settings] | None = None,
        notifier: Notifier | None = None,
        reloaded: Callable[[Settings], None] | None = None,
        kinds: Classifier | None = None,
    ) -> None:
        self.settings = settings
        """The settings in force: the ones the daemon started with, then a reload's."""
        self.roots = roots
        self.indexer = indexer
        self.health = health
        self.changes = changes
        self.watcher = watcher
        self.config_error = ""
        """Why the last reload was refused (status shows it); "" after one succeeds."""
        self.reread = reread
        """Resolves the settings again from the same flags, environment and file."""
        self.notifier = notifier or Notifier(None)
        self.reloaded = reloaded
        """Told the settings a reload brings, for what the app built from them (the
        documents' extractor)."""
        self.kinds = kinds
        """The kind rules and boosts the index uses (None: a reload leaves them)."""
        self._lock = anyio.Lock()
        self._reloading = anyio.Lock()

    # ------------------------------------------------------------ roots at runtime

    async def add_root(self, raw: str) -> Changed:
        if not os.path.isabs(raw):
            raise BadRoot(f"give the root as an absolute path, not {raw!r}")
        async with self._lock:
            root = await anyio.to_thread.run_sync(self._check_new_root, raw)
            done, where = await anyio.to_thread.run_sync(partial(self._persist, root, add=True))
            await self._attach(root)
            log.info("root added: %s (%s)", root, done)
        return Changed(f"{done}; indexing it now", where)

    async def remove_root(self, raw: str) -> Changed:
        async with self._lock:
            wanted = await anyio.to_thread.run_sync(_real_path, raw)
            if wanted not in self.roots.paths:
                listed = ", ".join(str(r) for r in self.roots.paths) or "none"
                raise BadRoot(f"{wanted} is not a root (roots: {listed})")
            done, where = await anyio.to_thread.run_sync(partial(self._persist, wanted, add=False))
            removed = await self._detach(wanted)
            log.info("root removed: %s (%s, %d documents forgotten)", wanted, done, removed)
        return Changed(f"{done}; {removed:,} documents removed", where)

    def _check_new_root(self, raw: str) -> Path:
        """Validated like the roots in the settings, plus: not inside the state directory."""
        try:
            root = check_root(Path(raw), self.roots.paths)
        except SettingsError as exc:
            raise BadRoot(str(exc)) from None
        if root.is_relative_to(self.settings.state_dir.resolve()):
            raise BadRoot(f"{root} lies inside the daemon's state directory")
        return root

    def _persist(self, root: Path, *, add: bool) -> tuple[str, Path]:
        """Write a root added or removed where the roots came from, so that reloads and
        restarts keep it; returns what was done and the file."""
        if self.settings.roots_source != "config":
            record = self.settings.roots_record
            change = root_changes.record_add if add else root_changes.record_remove
            return change(record, root), record
        config = self.settings.config_path or default_config_path()
        edit = config_file.persist_add if add else config_file.persist_remove
        return edit(config, root, self.roots.paths), config

    async def _attach(self, root: Path) -> None:
        self.indexer.rules.configure_root(self.settings.options_for(root))
        self.roots.add(root)
        await self.watcher.add_root(str(root), self.settings.watch_mode(root))
        self.changes.rescan(str(root))

    async def _detach(self, wanted: Path) -> int:
        root = str(wanted)
        await self.watcher.remove_root(root)
        self.changes.forget_root(root)
        self.roots.remove(wanted)
        self.indexer.rules.forget_root(root)
        removed = await self.indexer.remove_root(root)
        self.health.record(RootRemoved(root))
        return removed

    # ------------------------------------------------------------ reload (SIGHUP)

    async def reload(self) -> str:
        """Re-read the settings and apply them; returns what changed. A configuration
        that does not validate is refused with ConfigRefused (the running one stays,
        status says why), and so is logged. The service manager hears RELOADING=1
        before and READY=1 once the new configuration is in force or refused, which is
        what ``Type=notify-reload`` waits for."""
        async with self._reloading:
            self.notifier.reloading("reloading the configuration")
            try:
                return await self._reload()
            finally:
                self.notifier.ready(f"serving {len(self.roots.paths)} root(s)")

    async def _reload(self) -> str:
        if self.reread is None:
            raise ConfigRefused("this kbindexd was started without a configuration to re-read")
        try:
            new = await anyio.to_thread.run_sync(self.reread)
        except SettingsError as exc:
            log.error("reload refused, keeping the running configuration: %s", exc)
            self.config_error = str(exc)
            raise ConfigRefused(
                f"reload refused, keeping the running configuration: {exc}"
            ) from None
        try:
            summary = await self.apply(new)
        except Exception as exc:
            # A reload that fails halfway (a write to a full disk) must not take the
            # daemon down; the next reload or scan completes it.
            log.exception("reload failed")
            self.config_error = f"reload failed halfway ({exc}); see the log"
            raise ConfigRefused(self.config_error) from None
        log.info("%s", summary)
        return summary

    async def apply(self, new: Settings) -> str:
        """Apply re-read settings without dropping connections: roots, ignore rules,
        extensions, size cap, intervals. Returns a summary for the log."""
        unchanged = [
            name
            for name in ("state_dir", "socket_path")
            if getattr(new, name) != getattr(self.settings, name)
        ]
        async with self._lock:
            # Before any root is attached: its first scan classifies with the new rules.
            reclassify = set() if self.kinds is None else self.kinds.configure(*kind_rules(new))
            self.indexer.rules.apply(new)
            self.indexer.max_file_bytes = new.max_file_bytes
            self.indexer.max_document_bytes = new.max_document_bytes
            if self.reloaded is not None:
                self.reloaded(new)
            old_roots, new_roots = set(self.roots.paths), set(new.roots)
            self.settings = new
            for root in sorted(old_roots - new_roots):
                await self._detach(root)
            for root in sorted(new_roots - old_roots):
                await self._attach(root)
            kinds_changed = 0
            for root in sorted(old_roots & new_roots):
                if str(root) in reclassify:
                    kinds_changed += await self.indexer.reclassify(str(root))
                self.changes.rescan(str(root))
        self.config_error = ""
        summary = (
            f"reloaded: {len(new_roots)} root(s), {len(new_roots - old_roots)} added, "
            f"{len(old_roots - new_roots)} removed; {describe_roots(new)}"
        )
        if kinds_changed:
            summary += f"; {kinds_changed} file(s) given another kind by the new rules"
        if unchanged:
            summary += f"; {' and '.join(unchanged)} change only at restart"
        return summary


def kind_rules(
    settings: Settings,
) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, float] | None]:
    """The arguments of ``kinds.Classifier`` (and its ``configure``) in ``settings``:
    each root's kind rules, and the kind boosts (None: the defaults)."""
    rules = {str(o.path): dict(o.kinds) for o in settings.root_options if o.kinds}
    boosts = None if settings.kind_boosts is None else dict(settings.kind_boosts)
    return rules, boosts


def describe_roots(settings: Settings) -> str:
    """Where the roots come from and what was kept of the changes made at run time, for
    the log at start and at a reload; recorded roots left out are logged as warnings."""
    for reason in settings.roots_left_out:
        log.warning("%s", reason)
    if settings.roots_source == "config":
        return f"roots from {settings.roots_origin} (kbctl roots add|remove edit it)"
    text = f"roots from {settings.roots_origin}"
    if settings.roots_kept:
        text += (
            f"; kept from kbctl roots add|remove: {', '.join(settings.roots_kept)} "
            f"(recorded in {settings.roots_record})"
        )
    return text


def _real_path(raw: str) -> Path:
    return Path(os.path.realpath(Path(raw).expanduser()))
