"""Editing the ``roots`` list of the TOML config file, atomically, keeping the rest of it.

Used by ``kbctl roots add|remove``. A text edit rather than writing the file anew from
parsed values, because the file is the user's, with comments and layout. Only the
top-level ``roots = [...]`` assignment is replaced (or inserted before the first key
when there is none). The result is parsed again and must equal what was intended
before it replaces the file (temp file beside it, fsync, rename), so a file this code
cannot edit safely is left untouched and the error says so. A config file that is a
symlink (dotfile managers) is edited at its target, so the link survives.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ROOTS_KEY = re.compile(r"(?m)^[ \t]*roots[ \t]*=[ \t]*")
_TABLE = re.compile(r"(?m)^[ \t]*\[")


class ConfigError(Exception):
    """The config file cannot be read, edited safely or written."""


def persist_add(path: Path, root: Path, running: Sequence[Path]) -> str:
    """List ``root`` in the config at ``path``; returns what was done, for the reply.
    A config without ``roots`` starts from the ``running`` roots, so that the next start
    indexes what this daemon indexes now."""
    text, values = _read(path)
    entries = _entries(values, running)
    if any(_resolve(e, path.parent) == root for e in entries):
        return f"{root} was already listed in {path}"
    _write(path, text, values, [*entries, str(root)])
    return f"added {root} to {path}"


def persist_remove(path: Path, root: Path, running: Sequence[Path]) -> str:
    text, values = _read(path)
    entries = _entries(values, running)
    kept = [e for e in entries if _resolve(e, path.parent) != root]
    if len(kept) == len(entries):
        return f"{root} was not listed in {path}"
    # The daemon refuses a [root."..."] table for a path that is not a root: removing
    # the root and leaving its table would write a file it no longer starts with.
    tables = values.get("root")
    if isinstance(tables, dict):
        for name in tables:
            if _resolve(name, path.parent) == root:
                raise ConfigError(
                    f'{path} has a [root."{name}"] table for {root}: delete that table, '
                    "then remove the root again"
                )
    _write(path, text, values, kept)
    return f"removed {root} from {path}"


def _entries(values: dict[str, Any], running: Sequence[Path]) -> list[str]:
    raw = values.get("roots")
    if raw is None:
        return [str(r) for r in running]
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ConfigError("roots in the config file is not a list of paths; fix it by hand")
    return list(raw)


def _resolve(entry: str, base: Path) -> Path:
    candidate = Path(entry).expanduser()
    if not candidate.is_absolute():
        candidate = base / candidate
    return Path(os.path.realpath(candidate))


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it first") from None


def _write(path: Path, text: str, values: dict[str, Any], roots: list[str]) -> None:
    assignment = "roots = [" + "".join(f"\n    {json.dumps(r, ensure_ascii=False)}," for r in roots)
    assignment += "\n]" if roots else "]"
    span = _value_span(text) if "roots" in values else None
    if span is not None:
        updated = text[: span[0]] + assignment + text[span[1] :]
    elif "roots" in values:
        raise ConfigError(f"cannot find the roots = [...] line in {path}; edit it by hand")
    else:
        at = _first_statement(text)
        updated = text[:at] + assignment + "\n" + ("\n" if text[at:] else "") + text[at:]
    try:
        parsed = tomllib.loads(updated)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed != {**values, "roots": roots}:
        raise ConfigError(f"cannot edit {path} safely; edit its roots = [...] by hand")
    replace(path.resolve() if path.is_symlink() else path, updated)


def _value_span(text: str) -> tuple[int, int] | None:
    """(start of the ``roots =`` line, end of its array) for the top-level assignment."""
    first_table = _TABLE.search(text)
    limit = first_table.start() if first_table else len(text)
    match = _ROOTS_KEY.search(text, 0, limit)
    if match is None:
        return None
    i = match.end()
    if i >= len(text) or text[i] != "[":
        return None
    depth = 0
    quote = ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            newline = text.find("\n", i)
            i = len(text) if newline == -1 else newline
            continue
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return match.start(), i + 1
        i += 1
    return None


def _first_statement(text: str) -> int:
    """Offset of the first line that is not blank or a comment (keys go before tables)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.lstrip().startswith("#"):
            return offset
        offset += len(line)
    return offset


def replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file beside it, fsync, rename), keeping
    the file's mode (0600 for a new one); raises ConfigError."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
