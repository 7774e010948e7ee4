"""A kind for every file, from its path: ``doc``, ``code``, ``test``, ``config``,
``data``, ``generated``, ``changelog``, ``vendored`` or ``other``.

Queries filter by kind, and ranking prefers some kinds to others (documentation and
source over changelogs, generated files and vendored trees). The kind comes from the
path relative to the root alone, so it is known without reading the file and stays
right through a move (recomputed from the new path).

The rules ship as defaults; a root's ``[root."PATH".kinds]`` table puts its own before
them: ``generated = ["out/**", "*.pb.go"]`` (gitignore-style patterns, as in
``exclude``). The first rule that matches decides: a root's own rules in the order given,
then the defaults from vendored to code (a vendored tree's tests are vendored; a
generated changelog is generated).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Final

import pathspec

KINDS: Final = (
    "doc",
    "code",
    "test",
    "config",
    "data",
    "generated",
    "changelog",
    "vendored",
    "other",
)

_VENDORED_DIRS: Final = frozenset(
    {"vendor", "vendored", "third_party", "third-party", "thirdparty", "node_modules",
     "site-packages", "bower_components", ".venv", "venv", "external", "extern", "deps"}
)  # fmt: skip
_GENERATED_DIRS: Final = frozenset(
    {"dist", "build", "_build", "out", "target", "generated", "__generated__", ".next"}
)
_GENERATED_NAME: Final = re.compile(
    r"(\.min\.(js|css)|\.map|_pb2\.pyi?|_pb2_grpc\.py|\.pb\.(go|cc|h)|\.g\.dart|\.designer\.cs"
    r"|\.generated\.\w+|\.gen\.\w+|\.lock|-lock\.json|-lock\.yaml)$"
    r"|^(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|poetry\.lock|cargo\.lock|go\.sum)$",
    re.I,
)
_CHANGELOG_NAME: Final = re.compile(
    r"^(change[-_ ]?log|changes|history|news|release[-_ ]?notes|releases)(\.\w+)?$", re.I
)
_CHANGELOG_DIRS: Final = frozenset({"changelog", "changelogs", "changes", "release-notes",
                                    "releasenotes", "release_notes", "newsfragments"})  # fmt: skip
_TEST_DIRS: Final = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "t"})
_TEST_NAME: Final = re.compile(
    r"^(test_.+\.py|.+_test\.(py|go|rs|c|cc|cpp|rb|exs?)|.+\.(test|spec)\.[jt]sx?"
    r"|.+Tests?\.(java|kt|cs|swift|scala)|conftest\.py)$"
)
_DOC_EXTENSIONS: Final = frozenset(
    {".md", ".markdown", ".mdown", ".mkd", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc",
     ".org", ".tex", ".pod", ".rdoc", ".textile", ".wiki", ".html", ".htm", ".ipynb", ".man"}
)  # fmt: skip
_DOC_NAME: Final = re.compile(r"^(readme|license|licence|copying|authors|contributing|install"
                              r"|todo|faq|notice)(\.\w+)?$", re.I)  # fmt: skip
_CONFIG_EXTENSIONS: Final = frozenset(
    {".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".config", ".properties", ".env",
     ".editorconfig", ".gitignore", ".gitattributes", ".dockerignore", ".service", ".plist"}
)  # fmt: skip
_CONFIG_NAME: Final = re.compile(
    r"^(dockerfile|containerfile|makefile|gnumakefile|cmakelists\.txt|kconfig|vagrantfile"
    r"|procfile|gemfile|rakefile|justfile|setup\.cfg|tsconfig\.json|package\.json"
    r"|\.?[\w-]*rc)$",
    re.I,
)
_DATA_EXTENSIONS: Final = frozenset(
    {".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".xml", ".sql", ".geojson", ".svg",
     ".psv", ".dat", ".bib", ".ris", ".po", ".pot", ".xliff", ".srt", ".vtt", ".log"}
)  # fmt: skip
_CODE_EXTENSIONS: Final = frozenset(
    {".py", ".pyi", ".pyx", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx",
     ".m", ".mm", ".go", ".rs", ".java", ".kt", ".kts", ".scala", ".cs", ".fs", ".vb",
     ".swift", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".vue", ".svelte", ".rb",
     ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".hs", ".ml", ".mli", ".ex", ".exs",
     ".erl", ".hrl", ".clj", ".cljs", ".el", ".lisp", ".scm", ".rkt", ".dart", ".zig",
     ".nim", ".v", ".sv", ".vhd", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat",
     ".awk", ".sed", ".s", ".asm", ".css", ".scss", ".sass", ".less", ".proto",
     ".graphql", ".tf", ".nix", ".cmake", ".mk", ".gradle", ".groovy", ".f90", ".f",
     ".pas", ".ada", ".adb", ".cob", ".sol", ".wgsl", ".glsl", ".hlsl", ".cu"}
)  # fmt: skip


DEFAULT_BOOSTS: Final = {
    "test": 0.9,
    "config": 0.9,
    "data": 0.8,
    "changelog": 0.6,
    "generated": 0.5,
    "vendored": 0.5,
}
"""How much a match of each kind counts in ranking, against 1 for the others (docs,
code): a changelog or a vendored copy that says the same as the documentation ranks
below it (``bench/README.md``, "Kinds in ranking")."""


class BadKinds(ValueError):
    """A root's ``kinds`` table names an unknown kind or a pattern that does not parse."""


def default_kind(relpath: str) -> str:
    """The kind of the file at ``relpath`` (relative to its root) by the default rules."""
    parts = relpath.lower().split("/")
    directories, name = set(parts[:-1]), parts[-1]
    suffix = posixpath.splitext(name)[1]
    if directories & _VENDORED_DIRS:
        return "vendored"
    if directories & _GENERATED_DIRS or _GENERATED_NAME.search(name):
        return "generated"
    if _CHANGELOG_NAME.match(name) or directories & _CHANGELOG_DIRS:
        return "changelog"
    original_name = relpath.rsplit("/", 1)[-1]
    if directories & _TEST_DIRS or _TEST_NAME.match(original_name):
        return "test"
    if suffix in _DOC_EXTENSIONS or _DOC_NAME.match(name) or "docs" in directories:
        return "doc"
    if suffix in _CONFIG_EXTENSIONS or _CONFIG_NAME.match(name):
        return "config"
    if suffix in _DATA_EXTENSIONS:
        return "data"
    if suffix in _CODE_EXTENSIONS:
        return "code"
    return "other"


class Kinds:
    """The kind rules of one root: its own patterns (``overrides``: kind -> gitignore-style
    patterns), then the defaults."""

    def __init__(self, overrides: Mapping[str, Sequence[str]] | None = None) -> None:
        self._rules: list[tuple[str, pathspec.GitIgnoreSpec]] = []
        for kind, patterns in (overrides or {}).items():
            if kind not in KINDS:
                raise BadKinds(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
            try:
                self._rules.append((kind, pathspec.GitIgnoreSpec.from_lines(patterns)))
            except (ValueError, TypeError) as exc:
                raise BadKinds(f"kind {kind}: {exc}") from None

    def of(self, relpath: str) -> str:
        for kind, spec in self._rules:
            if spec.match_file(relpath):
                return kind
        return default_kind(relpath)


class Classifier:
    """The kind rules of every root (``Kinds`` per root path, the defaults elsewhere),
    and how much each kind counts in ranking (``boosts``)."""

    def __init__(
        self,
        rules: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        boosts: Mapping[str, float] | None = None,
    ) -> None:
        self._defaults = Kinds()
        self._given: dict[str, dict[str, tuple[str, ...]]] = {}
        self._roots: dict[str, Kinds] = {}
        self.boosts: tuple[tuple[str, float], ...] = ()
        """Each kind whose matches count less than the most preferred kind's, with its
        factor (0 < factor < 1): those of the most preferred count 1."""
        self.configure(rules, boosts)

    def configure(
        self,
        rules: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        boosts: Mapping[str, float] | None = None,
    ) -> set[str]:
        """Put new rules and boosts in force (a reload); returns the roots whose rules
        changed, whose files' kinds are to be computed again. Checked before anything
        changes: a BadKinds leaves the rules in force as they were."""
        given = {root: {k: tuple(p) for k, p in o.items()} for root, o in (rules or {}).items()}
        built = {root: Kinds(overrides) for root, overrides in given.items()}
        ranked = ranking_boosts(DEFAULT_BOOSTS if boosts is None else boosts)
        changed = {
            r for r in given.keys() | self._given.keys() if given.get(r) != self._given.get(r)
        }
        # Each attribute is replaced whole: a reader thread sees the old rules or the new.
        self._given, self._roots, self.boosts = given, built, ranked
        return changed

    def of(self, root: str, relpath: str) -> str:
        return self._roots.get(root, self._defaults).of(relpath)


def ranking_boosts(boosts: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """``boosts`` (kind -> factor, 1 for a kind not named) scaled so that the largest
    factor is 1, and only the kinds below it: a ranking cut early by a bound on the best
    score a document can have (``essential``) stays exact when no factor passes 1."""
    for kind, factor in boosts.items():
        if kind not in KINDS:
            raise BadKinds(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
        if not 0 < factor <= 100:
            raise BadKinds(f"the boost of {kind} must be above 0 and at most 100, not {factor}")
    factors = {kind: float(boosts.get(kind, 1.0)) for kind in KINDS}
    top = max(factors.values())
    return tuple((k, round(f / top, 6)) for k, f in factors.items() if f < top)
