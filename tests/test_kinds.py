"""The kind of a file from its path (``indexing.kinds``), and a root's own rules."""

from __future__ import annotations

import pytest
from kbindex.daemon.indexing.kinds import BadKinds, Kinds, default_kind


@pytest.mark.parametrize(
    ("relpath", "kind"),
    [
        ("README.md", "doc"),
        ("docs/guide/install.rst", "doc"),
        ("notes/2024/plan.md", "doc"),
        ("src/app/main.py", "code"),
        ("kernel/sched/core.c", "code"),
        ("tests/test_search.py", "test"),
        ("pkg/search_test.go", "test"),
        ("web/src/App.test.tsx", "test"),
        ("pyproject.toml", "config"),
        ("Dockerfile", "config"),
        (".github/workflows/ci.yml", "config"),
        ("data/points.csv", "data"),
        ("CHANGELOG.md", "changelog"),
        ("docs/release-notes/v1.2.md", "changelog"),
        ("HISTORY.rst", "changelog"),
        ("dist/bundle.min.js", "generated"),
        ("api/service_pb2.py", "generated"),
        ("package-lock.json", "generated"),
        ("vendor/github.com/x/y.go", "vendored"),
        ("node_modules/lib/tests/a.test.js", "vendored"),
        ("third_party/zlib/CHANGES", "vendored"),
        ("photo.xyz", "other"),
    ],
)
def test_default_kinds(relpath: str, kind: str) -> None:
    assert default_kind(relpath) == kind
    assert Kinds().of(relpath) == kind


def test_a_roots_rules_come_first_then_the_defaults() -> None:
    kinds = Kinds({"generated": ["out/**", "*.gen.md"], "doc": ["/handbook/*.txt"]})
    assert kinds.of("out/report.md") == "generated"
    assert kinds.of("notes/x.gen.md") == "generated"
    assert kinds.of("handbook/a.txt") == "doc"
    assert kinds.of("src/main.py") == "code"


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(BadKinds, match="unknown kind 'docs'"):
        Kinds({"docs": ["*.md"]})
