"""Which directories and files are indexed, decided in one place for scans and events.

Rules, in the order they are checked:

1. Built-in: version-control and dependency/build directories (they hold generated or
   vendored text that drowns real notes), directories marked as caches
   (``CACHEDIR.TAG``) or virtualenvs (``pyvenv.cfg``), and the daemon's own state and
   socket directories when they lie inside a root.
2. Extensions: ``included_extensions`` / ``excluded_extensions``.
3. The config's ``exclude_globs`` and ``[root."PATH"] exclude`` patterns. A .gitignore
   negation cannot undo them: the config is the user's last word.
4. Pattern files, nested, with negations, in git's semantics (pathspec's
   GitIgnoreSpec patterns; in one file the last pattern that matches the path itself
   decides, see ``Patterns.check_itself``), with ripgrep's precedence: ``.kbignore``
   (kbindex's own) over ``.rgignore`` over ``.ignore`` over ``.gitignore``, whatever
   their depth; among files of one name, the deepest with a matching pattern decides.
   (ripgrep's ``Ignore::matched_ignore`` in crates/ignore/src/dir.rs: one match per
   kind, deepest first, then ``custom.or(ignore).or(gitignore)``.) So a ``.ignore`` at
   the top can re-include what a deep ``.gitignore`` leaves out. As in git, a file
   inside an ignored directory cannot be re-included. As in git and ripgrep, a
   ``.gitignore`` applies only inside a git work tree (a ``.git`` directory or file in
   its directory or one above, up to ``/``): a source tarball often ships one meant for
   its packagers (Debian's kernel source has ``/*``). A repository inside another is a
   work tree of its own: the outer one's ``.gitignore`` files do not apply in it. The
   other three apply everywhere, across nested repositories too.
5. ``[root."PATH"] include``: when given, a file must match one of these patterns.

Every check returns a short reason (which rule, in which file, on which line) so
``kbctl why`` can explain it. Pattern files are cached and re-read when their size,
mtime, ctime or inode changes, so an edited pattern file takes effect at the next walk.
Scans and watcher events take the same path: a walk of the changed scope, whose
directories get their chain from ``context`` (above the scope) and ``enter``.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pathspec
from kbindex.daemon.settings import RootOptions, Settings

log = logging.getLogger(__name__)

WRITING_MARK: Final = ".kbindex-tmp-"
"""In the name of a note being written (``serving.notes``): never indexed, even when a
crash leaves one behind."""
IGNORED_DIR_NAMES: Final = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "_darcs",
        ".jj",
        "node_modules",
        "bower_components",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".gradle",
        ".terraform",
        ".next",
        ".nuxt",
        ".parcel-cache",
        ".cache",
        ".direnv",
        ".eggs",
        ".idea",
        ".vscode",
        ".Trash",
        ".Trash-1000",
    }
)
MARKER_FILES: Final = ("CACHEDIR.TAG", "pyvenv.cfg")
GITIGNORE: Final = ".gitignore"
IGNORE_FILES: Final = (GITIGNORE, ".ignore", ".rgignore", ".kbignore")
"""Pattern files read in every directory, from the lowest precedence to the highest
(their index is ``Patterns.rank``)."""
GIT_MARKER: Final = ".git"
"""A directory or file (a worktree's, a submodule's) that makes a git work tree."""
_LOOKED_FOR: Final = frozenset((*IGNORE_FILES, GIT_MARKER))
_GITIGNORE_RANK: Final = IGNORE_FILES.index(GITIGNORE)
_DIR_MARK: Final = "ps_d"
"""The group that ends pathspec's gitignore regexes where a pattern matched a directory
(pathspec's own ``_DIR_MARK``)."""
MAX_IGNORE_FILE_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Patterns:
    """Compiled gitignore-style patterns that apply below the directory ``base``."""

    base: str
    spec: pathspec.GitIgnoreSpec
    where: tuple[str, ...]
    """For each pattern of ``spec``, where it was written (shown in reasons)."""
    rank: int = 0
    """The precedence of the file's name: its index in ``IGNORE_FILES``."""
    last_first: tuple[tuple[re.Pattern[str], bool, int], ...] = ()
    """(regex, ignores, index in ``spec``) of every pattern, the last written first."""

    def check(self, rel: str) -> tuple[bool, str] | None:
        """(ignored, reason) when a pattern decides ``rel`` (relative to ``base``; a
        directory ends with ``/``), else None. ``ignored`` is False for a negation.
        For the config's patterns, where a folder's pattern covers what it holds."""
        result = self.spec.check_file(rel)
        if result.include is None or result.index is None:
            return None
        pattern = self.spec.patterns[result.index].pattern
        where = self.where[result.index] if result.index < len(self.where) else "?"
        return bool(result.include), f'pattern "{pattern!s}" in {where}'

    def check_itself(self, rel: str) -> tuple[bool, str] | None:
        """``check`` for a pattern file: only a pattern that matches ``rel`` itself
        counts, the last one deciding, as in git and ripgrep. pathspec also counts one
        that matches a parent directory (``d/`` matches ``d/x.md``): the walk has
        decided the parents already, and a ``!d/`` must not re-include a file of ``d``
        that another pattern leaves out."""
        for regex, ignores, index in self.last_first:
            found = regex.match(rel)
            if found is None:
                continue
            if _DIR_MARK in regex.groupindex and -1 < found.end(_DIR_MARK) < len(rel):
                continue  # it matched a parent directory of rel
            pattern = self.spec.patterns[index].pattern
            where = self.where[index] if index < len(self.where) else "?"
            return ignores, f'pattern "{pattern!s}" in {where}'
        return None


def compile_patterns(base: str, lines: Iterable[tuple[str, str]], rank: int = 0) -> Patterns | None:
    """Patterns from (pattern, where) pairs; blank lines are dropped, bad ones logged."""
    kept: list[tuple[str, str]] = []
    for line, where in lines:
        if not line.strip():
            continue
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except ValueError as exc:
            log.warning("ignoring bad pattern %r (%s): %s", line, where, exc)
            continue
        kept.append((line, where))
    if not kept:
        return None
    spec = pathspec.GitIgnoreSpec.from_lines([line for line, _ in kept])
    # pathspec keeps one pattern per non-blank line (comments as null patterns), so the
    # indexes line up; should a version drop some, reasons lose their line numbers.
    origins = tuple(w for _, w in kept) if len(spec.patterns) == len(kept) else ()
    last_first = tuple(
        (p.regex, bool(p.include), n)
        for n, p in reversed(list(enumerate(spec.patterns)))
        if isinstance(p, pathspec.RegexPattern) and p.regex is not None and p.include is not None
    )
    return Patterns(base, spec, origins, rank, last_first)


@dataclass(frozen=True, slots=True)
class Chain:
    """The pattern files that apply to the entries of one directory, in the order they
    decide: the highest rank first, the deepest first within a rank."""

    root: str
    files: tuple[Patterns, ...] = ()
    in_git: bool = False
    """Whether the directory is inside a git work tree, so its .gitignore files apply.
    Decided once per directory while walking down: a ``.git`` in its listing or its
    parent's answer."""


@dataclass(frozen=True, slots=True)
class _RootPatterns:
    exclude: Patterns | None
    include: Patterns | None


class IgnoreRules:
    def __init__(
        self,
        *,
        included_extensions: frozenset[str] | None,
        excluded_extensions: frozenset[str],
        private_dirs: tuple[Path, ...] = (),
        exclude_globs: Sequence[str] = (),
        root_options: Iterable[RootOptions] = (),
    ) -> None:
        self.included = included_extensions
        self.excluded = excluded_extensions
        self.private_dirs = frozenset(os.path.realpath(d) for d in private_dirs)
        self.exclude_globs = tuple(exclude_globs)
        self._roots: dict[str, _RootPatterns] = {}
        self._files: dict[str, tuple[tuple[int, int, int, int], Patterns | None]] = {}
        for options in root_options:
            self.configure_root(options)

    # ------------------------------------------------------------ configuration

    def apply(self, settings: Settings) -> None:
        """Take re-read settings (a reload): the extensions, ``exclude_globs``, and the
        config patterns of every root configured so far. A root added later is
        configured when it is added; one removed is forgotten."""
        self.included = settings.included_extensions
        self.excluded = settings.excluded_extensions
        self.exclude_globs = tuple(settings.exclude_globs)
        for root in list(self._roots):
            self.configure_root(settings.options_for(Path(root)))

    def configure_root(self, options: RootOptions) -> None:
        """Set a root's config patterns (at startup, and for roots added at runtime)."""
        root = str(options.path)
        lines = [(p, "exclude_globs in the config") for p in self.exclude_globs]
        lines += [(p, f'[root."{root}"] exclude in the config') for p in options.exclude]
        include = [(p, f'[root."{root}"] include in the config') for p in options.include]
        self._roots[root] = _RootPatterns(
            compile_patterns(root, lines), compile_patterns(root, include)
        )

    def forget_root(self, root: str) -> None:
        self._roots.pop(root, None)
        prefix = root + os.sep
        for path in [p for p in self._files if p.startswith(prefix)]:
            self._files.pop(path, None)

    def _root_patterns(self, root: str) -> _RootPatterns:
        found = self._roots.get(root)
        if found is None:
            found = self._roots[root] = _RootPatterns(
                compile_patterns(
                    root, [(p, "exclude_globs in the config") for p in self.exclude_globs]
                ),
                None,
            )
        return found

    # ------------------------------------------------------------ the walk's side

    def enter(self, chain: Chain, directory: str, names: Iterable[str] | None = None) -> Chain:
        """The chain for the entries of ``directory``: its parent's plus its own pattern
        files. ``names`` are the directory's entries when the caller has listed it;
        without them, one ``lstat`` looks for ``.git``."""
        if names is None:
            has_git = os.path.lexists(os.path.join(directory, GIT_MARKER))
            present: Collection[str] = IGNORE_FILES
        else:
            # Set against set: the smaller one (these five names) is what is iterated.
            present = _LOOKED_FOR.intersection(names)
            has_git = GIT_MARKER in present
        in_git = chain.in_git or has_git
        files = chain.files
        if has_git and chain.in_git:
            # A repository inside another is its own work tree: git and ripgrep stop
            # reading the outer .gitignore files at its top.
            files = tuple(p for p in files if p.rank != _GITIGNORE_RANK)
        added = tuple(
            p
            for rank, name in enumerate(IGNORE_FILES)
            if name in present
            and (in_git or rank != _GITIGNORE_RANK)
            and (p := self._load(directory, name, rank))
        )
        if not added and files is chain.files and in_git == chain.in_git:
            return chain
        # Bases lie on one line of descent, so the longer one is the deeper.
        ordered = sorted(files + added, key=lambda p: (-p.rank, -len(p.base)))
        return Chain(chain.root, tuple(ordered), in_git)

    def ignored_dir(
        self, path: str, name: str, chain: Chain | None = None, *, walking: bool = False
    ) -> str | None:
        """Why directory ``path`` (named ``name``) is not walked, or None.

        ``walking``: the walk asks about a directory it found in its parent's listing.
        Then ``path`` is a real path (below a resolved root, never through a symlink), so
        it is not resolved (a system call per component), and the walk checks the marker
        files itself once it lists the directory (``marked``): two system calls less per
        directory, at every scan."""
        if name in IGNORED_DIR_NAMES or name.endswith(".egg-info"):
            return f"built-in ignore: {name}/"
        if path in self.private_dirs or (
            not walking and os.path.realpath(path) in self.private_dirs
        ):
            return "the daemon's own state or socket directory"
        if not walking:
            for marker in MARKER_FILES:
                if os.path.exists(os.path.join(path, marker)):
                    return f"contains {marker}"
        return None if chain is None else self._by_patterns(chain, path, is_dir=True)

    def marked(self, directory: str, names: Collection[str]) -> str | None:
        """Why ``directory`` is not walked for a marker file among ``names`` (its
        listing), or None: the walk's side of ``ignored_dir``'s marker check."""
        for marker in MARKER_FILES:
            if marker in names and os.path.exists(os.path.join(directory, marker)):
                return f"contains {marker}"
        return None

    def ignored_file(
        self, name: str, path: str | None = None, chain: Chain | None = None
    ) -> str | None:
        """Why a file named ``name`` is not indexed, or None. The extension rules need
        only the name; pattern rules run when ``path`` and its directory's ``chain`` are given."""
        if WRITING_MARK in name:
            return "a note kbindex is writing (a temporary file)"
        # With every extension included and none excluded (``--include-ext '*'``, the
        # usual setting for a source tree) the extension decides nothing: not computed.
        if self.excluded or self.included is not None:
            ext = os.path.splitext(name)[1].lower()
            if ext in self.excluded:
                return f"extension {ext} is in excluded_extensions"
            if self.included is not None and ext not in self.included:
                return f"extension {ext or '(none)'} is not in included_extensions"
        if path is None or chain is None:
            return None
        return self._by_patterns(chain, path, is_dir=False)

    def name_decides(self, chain: Chain) -> bool:
        """Whether, in a directory with this ``chain``, only ``WRITING_MARK`` in a file's
        name can make ``ignored_file`` skip it: no extension rules, no pattern file, no
        config pattern. The walk then asks about no other file: on a source tree that is
        nearly every directory, and one call per file less."""
        if self.excluded or self.included is not None or chain.files:
            return False
        config = self._root_patterns(chain.root)
        return config.exclude is None and config.include is None

    def _by_patterns(self, chain: Chain, path: str, *, is_dir: bool) -> str | None:
        root = chain.root
        config = self._root_patterns(root)
        if not chain.files and config.exclude is None and config.include is None:
            return None  # no pattern applies: most of a tree without ignore files
        slash = "/" if is_dir else ""
        rel_root = path[len(root) + 1 :]
        if config.exclude is not None:
            hit = config.exclude.check(rel_root + slash)
            if hit is not None and hit[0]:
                return hit[1]
        for patterns in chain.files:
            hit = patterns.check_itself(path[len(patterns.base) + 1 :] + slash)
            if hit is not None:
                if hit[0]:
                    return hit[1]
                break  # re-included by a negation that takes precedence
        if not is_dir and config.include is not None:
            hit = config.include.check(rel_root)
            if hit is None or not hit[0]:
                return f'not matched by the include patterns of [root."{root}"] in the config'
        return None

    # ------------------------------------------------------------ events, scopes, why

    def context(
        self, root: str, directory: str, memo: dict[str, Chain | str] | None = None
    ) -> Chain | str:
        """The chain for the entries of ``directory`` (``root`` or a directory inside
        it), or the reason ``directory`` or one above it is not walked. ``memo`` shares
        work between the many scopes of one refresh."""
        if memo is not None and directory in memo:
            return memo[directory]
        out: Chain | str
        if directory == root:
            out = self.enter(Chain(root, in_git=git_above(root)), root)
        else:
            parent, name = os.path.split(directory)
            above = self.context(root, parent, memo)
            if isinstance(above, str):
                out = above
            else:
                reason = self.ignored_dir(directory, name, above)
                out = reason if reason is not None else self.enter(above, directory)
        if memo is not None:
            memo[directory] = out
        return out

    def explain(self, root: str, path: str) -> str | None:
        """Why ``path`` (inside ``root``) is not indexed by rule, or None."""
        parent, name = os.path.split(path)
        if path == root:
            return "it is a directory"
        chain = self.context(root, parent)
        if isinstance(chain, str):
            return chain
        if os.path.isdir(path):
            return self.ignored_dir(path, name, chain) or "it is a directory"
        return self.ignored_file(name, path, chain)

    def quick_ignored(self, root: str, path: str, *, is_dir: bool) -> bool:
        """A cheap test for the watcher's thread: is ``path`` (inside ``root``) under a
        built-in ignored or a private directory, or (a directory) one itself? Pattern
        rules need file reads: the walk applies them."""
        parts = path[len(root) + 1 :].split(os.sep)
        if not is_dir:
            parts.pop()
        if any(p in IGNORED_DIR_NAMES or p.endswith(".egg-info") for p in parts):
            return True
        # Only a private directory inside the root hides paths: one that holds the
        # root (a socket directory above it) hides nothing.
        return any(
            d.startswith(root + os.sep) and (path == d or path.startswith(d + os.sep))
            for d in self.private_dirs
        )

    def is_pattern_file(self, name: str) -> bool:
        return name in IGNORE_FILES

    # ------------------------------------------------------------ pattern files

    def _load(self, directory: str, name: str, rank: int) -> Patterns | None:
        path = os.path.join(directory, name)
        try:
            st = os.stat(path)
        except OSError:
            self._files.pop(path, None)
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        cached = self._files.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            # O_NONBLOCK: a FIFO swapped in after the stat must not hang the open.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                text = fh.read(MAX_IGNORE_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc.strerror or exc)
            return None
        patterns = compile_patterns(
            directory,
            ((line, f"{path} line {n}") for n, line in enumerate(text.splitlines(), 1)),
            rank,
        )
        self._files[path] = (key, patterns)
        return patterns


def git_above(directory: str) -> bool:
    """Whether a ``.git`` lies in a directory above ``directory``, up to ``/`` (the
    look above a root, once per walk of it; the walk looks inside the root)."""
    parent = os.path.dirname(directory)
    while parent != directory:
        if os.path.lexists(os.path.join(parent, GIT_MARKER)):
            return True
        directory, parent = parent, os.path.dirname(parent)
    return False
