"""The architecture contracts (pyproject.toml, ``[tool.importlinter]``) hold, and they are
real: a planted import that breaks one makes ``lint-imports`` fail and name it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (the test extra)"),
]


def _lint(extra_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_contracts_hold() -> None:
    done = _lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_front_end_importing_the_daemon_breaks_a_contract() -> None:
    # A copy of kbindex.ctl with one more module, first on the path: the namespace
    # package kbindex takes its ctl from the copy and the rest from the installed tree.
    plant = Path(tempfile.mkdtemp(prefix="kbplant-"))
    try:
        shutil.copytree(ROOT / "ctl", plant / "kbindex" / "ctl")
        (plant / "kbindex" / "ctl" / "planted.py").write_text("import kbindex.daemon.app\n")
        done = _lint(str(plant))
    finally:
        shutil.rmtree(plant)
    assert done.returncode != 0
    assert "front ends never import the daemon BROKEN" in done.stdout
    assert "kbindex.ctl.planted -> kbindex.daemon.app" in done.stdout


@pytest.mark.parametrize(
    ("where", "planted", "contract"),
    [
        (
            "index",
            "kbindex.daemon.indexing.scanner",
            "the index interface imports nothing else of the daemon",
        ),
        (
            "backends/postgres",
            "kbindex.daemon.backends.sqlite.store",
            "the backends are independent",
        ),
        (
            "backends/sqlite",
            "kbindex.daemon.indexing.textfile",
            "backends import only the index interface and the engine",
        ),
        (
            "serving",
            "kbindex.daemon.backends.sqlite.index",
            "only the composition root imports a backend",
        ),
        ("indexing", "kbindex.daemon.serving.service", "the daemon's stages are layers"),
    ],
)
def test_a_daemon_import_across_the_seam_breaks_a_contract(
    where: str, planted: str, contract: str
) -> None:
    # kbindex.daemon is a regular package: the whole of it is copied, first on the path.
    plant = Path(tempfile.mkdtemp(prefix="kbplant-"))
    try:
        shutil.copytree(ROOT / "daemon", plant / "kbindex" / "daemon")
        (plant / "kbindex" / "daemon" / where / "planted.py").write_text(f"import {planted}\n")
        done = _lint(str(plant))
    finally:
        shutil.rmtree(plant)
    assert done.returncode != 0
    assert f"{contract} BROKEN" in done.stdout
    source = "kbindex.daemon." + where.replace("/", ".") + ".planted"
    # Long lines wrap in lint-imports' report.
    assert f"{source} -> {planted}" in " ".join(done.stdout.split())
