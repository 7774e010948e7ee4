"""Daemon replies turned into tool results: structured content plus a compact text form.

Every result has a size budget fixed in characters, independent of how large the
indexed files are: a search over huge files answers with as many hits as fit, marks the
answer truncated and says how to get the rest. Both forms (the JSON structured content
and the text a model reads) are built from the same trimmed data, so they never disagree.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import quote

import msgspec
from kbindex.proto import report
from kbindex.proto.messages import (
    MATCH_CLOSE,
    MATCH_OPEN,
    FileInfo,
    FindFilesReply,
    Freshness,
    Hit,
    ReadFileReply,
    RefreshReply,
    SearchReply,
    StatusReply,
)
from kbindex.proto.report import ago, iso

BUDGET: Final = 12_000
"""Characters per form (text, and JSON of the structured content): ~24 KB per response."""
SNIPPET_CHARS: Final = 500
URI_PREFIX: Final = "kbindex://file/"

_json = msgspec.json.Encoder()


def file_uri(path: str) -> str:
    """The resource URI of an absolute path: ``/a/b c.md`` -> ``kbindex://file/a/b%20c.md``."""
    return URI_PREFIX + quote(path.lstrip("/"), safe="/")


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_clip = report.clip


def _size(value: Any) -> int:
    return len(_json.encode(value))


def _notes(lines: list[str], notes: list[str]) -> None:
    lines.extend(f"Note: {note}" for note in notes)


# ------------------------------------------------------------------ search


def freshness(fresh: Freshness | None) -> dict[str, Any]:
    if fresh is None:
        return {"last_scan": None, "scanning": False, "pending_changes": 0}
    return {
        "last_scan": iso(fresh.last_scan_at),
        "scanning": fresh.scanning,
        "pending_changes": fresh.pending,
    }


def freshness_text(fresh: Freshness | None) -> str:
    if fresh is None:
        return "index freshness unknown"
    text = f"index updated {ago(fresh.last_scan_at)}"
    if fresh.scanning:
        text += "; a scan is running"
    if fresh.pending:
        text += f"; {fresh.pending} file change(s) not indexed yet"
    if fresh.scanning or fresh.pending:
        text += ", results may lag"
    if fresh.rebuilding:
        text += f"; the index is being rebuilt ({fresh.rebuilding}), results may be out of date"
    if fresh.index_error:
        text += f"; the index cannot be written ({fresh.index_error}), results may be out of date"
    if fresh.machines_behind:
        text += f"; machine(s) behind: {', '.join(fresh.machines_behind)}"
    if fresh.machines_gone:
        text += f"; machine(s) gone, rows may be stale: {', '.join(fresh.machines_gone)}"
    return text


def _snippet(text: str) -> str:
    """Clipped, without a ``⟦`` whose ``⟧`` the clip cut off."""
    clipped = _clip(text, SNIPPET_CHARS)
    if clipped.count(MATCH_OPEN) > clipped.count(MATCH_CLOSE):
        before, _, after = clipped.rpartition(MATCH_OPEN)
        clipped = before + after
    return clipped


def _hit(hit: Hit) -> dict[str, Any]:
    return (
        {
            "path": hit.path,
            "relpath": hit.relpath,
            "root": hit.root,
            "title": hit.title,
            "line": hit.line,
            "snippet": _snippet(hit.snippet),
            "score": round(hit.score, 4),
            "last_modified": iso(hit.last_modified),
            "size": hit.size,
            "uri": file_uri(hit.path),
        }
        | ({"machine": hit.machine} if hit.machine else {})
        | _page(hit)
    )


def _page(hit: Hit) -> dict[str, Any]:
    """A document's page: ``line`` is the line of its whole text, as read_file numbers it."""
    return {"page": hit.page, "page_line": hit.page_line} if hit.page else {}


def search(reply: SearchReply, query: str, notes: list[str]) -> tuple[dict[str, Any], str]:
    hits: list[dict[str, Any]] = []
    lines: list[str] = []
    used_json = used_text = 0
    for n, hit in enumerate(reply.hits, 1):
        item = _hit(hit)
        title = f" — {_clip(hit.title, 120)}" if hit.title else ""
        block = (
            f"{n}. {hit.machine + ':' if hit.machine else ''}{hit.path}:{hit.line}{title}"
            f"{f' (page {hit.page}, line {hit.page_line})' if hit.page else ''}"
            f" [modified {item['last_modified'][:10]}]\n"
            + (f"   ({_clip(hit.context, 200)})\n" if hit.context else "")
            + f"   {item['snippet']}"
        )
        cost_json, cost_text = _size(item), len(block) + 1
        if hits and (used_json + cost_json > BUDGET or used_text + cost_text > BUDGET):
            break
        hits.append(item)
        lines.append(block)
        used_json += cost_json
        used_text += cost_text
    omitted = len(reply.hits) - len(hits)
    truncated = reply.truncated or omitted > 0 or reply.total_hits > len(hits)
    structured: dict[str, Any] = {
        "query": query,
        "results": hits,
        "returned": len(hits),
        "total_hits": reply.total_hits,
        "truncated": truncated,
        "mode": reply.mode,
        "freshness": freshness(reply.freshness),
        "notes": list(notes),
    }
    if not hits:
        head = f"No matches for {query!r} ({freshness_text(reply.freshness)})."
        tips = "Try fewer or different words, a prefix like 'schedul*', or drop path_glob."
        text_lines = [head, tips]
    else:
        head = (
            f"{reply.total_hits} match(es) for {query!r}, showing {len(hits)} "
            f"({freshness_text(reply.freshness)}):"
        )
        text_lines = [head, *lines]
        if omitted:
            notes = [*notes, f"{omitted} more hit(s) left out to keep this answer small."]
        if truncated:
            text_lines.append(
                "More matches exist: narrow the query or path_glob, or raise limit (max 100)."
            )
        text_lines.append(
            "To read around a hit: read_file(path, start_line=a few lines before it)."
        )
    structured["notes"] = list(notes)
    _notes(text_lines, notes)
    return structured, "\n".join(text_lines)


# ------------------------------------------------------------------ stats


def status(reply: StatusReply) -> tuple[dict[str, Any], str]:
    progress = reply.progress
    structured = report.status(reply)
    errors = structured["recent_errors"]
    took = f", took {reply.last_scan_seconds:.1f} s" if reply.last_scan_seconds is not None else ""
    lines = [
        f"kbindex: {reply.indexed_files} files indexed ({reply.total_documents} documents, "
        f"{reply.index_size_mb:.1f} MB index); last scan {ago(reply.last_scan_at)}{took}; "
        f"{reply.errors_encountered} error(s).",
    ]
    if progress is not None and reply.scanning:
        lines.append(f"Scanning now: {progress.phase} {progress.done}/{progress.total}.")
    if not reply.roots:
        lines.append("No folders are indexed: the user can add one with `kbctl roots add PATH`.")
    else:
        lines.append("Indexed folders:")
    for r in reply.roots:
        detail = f" ({r.detail})" if r.detail else ""
        writable = ", writable (notes can be written here)" if r.writable else ""
        # The scope names a where filter takes, which only the daemon's settings know.
        scope = f", where scope:{r.scope}" if r.scope else ""
        described = f" ({r.description})" if r.description else ""
        lines.append(f"- {r.path}: {r.state}, {r.files} files{writable}{detail}{scope}{described}")
        if r.warning:
            lines.append(f"  Warning: {r.warning}")
    if reply.skipped:
        lines.append("Skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(reply.skipped.items())))
    if errors:
        lines.append("Recent errors:")
        lines.extend(f"- {e['path']}: {e['reason']}" for e in errors)
    if reply.index_recovered:
        lines.append(f"The index was rebuilt after corruption: {reply.index_recovered}")
    if reply.index_rebuilding:
        lines.append(
            "The index is being rebuilt from the files, answers may be out of date:"
            f" {reply.index_rebuilding}"
        )
    if reply.index_error:
        lines.append(
            f"The index cannot be written, answers may be out of date: {reply.index_error}"
        )
    if reply.unconfigured:
        lines.append(
            f"kbindexd refused its configuration, nothing is indexed: {reply.config_error}"
        )
    elif reply.config_error:
        lines.append(f"The last configuration reload was refused: {reply.config_error}")
    return structured, _clip("\n".join(lines), BUDGET)


# ------------------------------------------------------------------ refresh


def refresh(reply: RefreshReply, scope: str, seconds: float) -> tuple[dict[str, Any], str]:
    structured = {
        "success": not reply.interrupted,
        "scope": scope,
        "files_processed": reply.files_processed,
        "files_changed": reply.files_changed,
        "files_removed": reply.files_removed,
        "errors": reply.errors,
        "seconds": round(seconds, 3),
    }
    text = (
        f"Refreshed {scope} in {seconds:.1f} s: {reply.files_processed} file(s) checked, "
        f"{reply.files_changed} changed, {reply.files_removed} removed, "
        f"{reply.errors} error(s)."
    )
    if reply.errors:
        text += " get_index_stats lists the recent errors."
    if reply.interrupted:
        text = (
            f"kbindexd is stopping: the refresh of {scope} ended early, after "
            f"{reply.files_changed} file(s) read; the rest is checked when it starts again."
        )
    return structured, text


# ------------------------------------------------------------------ read_file


_PAGE_ROW: Final = re.compile(r"\[page (\d+)\]")


def split_numbered(reply: ReadFileReply) -> tuple[list[str], list[str]]:
    """The reply's lines twice: numbered as the daemon sends them (``  7| text``), and bare.

    Should the daemon ever send unnumbered text, it is taken as bare lines and numbered here.
    """
    rows = reply.text.split("\n") if reply.text else []
    bare: list[str] = []
    n = reply.start_line - 1
    for row in rows:
        if reply.pages and _PAGE_ROW.fullmatch(row):
            bare.append(row)  # a document's ``[page N]`` row: above its page's first line
            continue
        n += 1
        number, sep, rest = row.partition("| ")
        if not sep or number.strip() != str(n):
            width = len(str(reply.start_line + len(rows) - 1))
            numbered = [f"{m:>{width}}| {line}" for m, line in enumerate(rows, reply.start_line)]
            return numbered, rows
        bare.append(rest)
    return rows, bare


def read_file(reply: ReadFileReply, notes: list[str]) -> tuple[dict[str, Any], str]:
    """Numbered lines for the model, bare text in the structured form, both within budget."""
    numbered, bare = split_numbered(reply)
    kept = 0
    used = 0
    clipped = False
    for row in numbered:
        if used + len(row) + 1 > BUDGET:
            if kept:
                break
            # A single enormous line (minified code, a data dump): show its start.
            numbered[0] = _clip(row, BUDGET)
            bare[0] = _clip(bare[0], BUDGET)
            clipped = True
        kept += 1
        used += len(numbered[kept - 1]) + 1
    markers = sum(1 for row in numbered[:kept] if _PAGE_ROW.fullmatch(row)) if reply.pages else 0
    end_line = reply.start_line + kept - markers - 1
    truncated = reply.truncated or clipped or kept < len(numbered)
    if not kept and truncated:
        end_line = reply.start_line  # that unreadable line counts as passed
    next_start = end_line + 1 if truncated and end_line < reply.total_lines else None
    if not kept:
        end_line = reply.start_line - 1
    # A document continues by page: the page after the last line shown, once that page
    # is whole (a page cut short goes on by line).
    next_page = None
    if reply.pages and next_start is None and reply.end_line < reply.total_lines:
        next_page = (reply.page or _page_of(numbered[:kept])) + 1
    structured = {
        "path": reply.path,
        "start_line": reply.start_line,
        "end_line": end_line,
        "total_lines": reply.total_lines,
        "truncated": truncated,
        "next_start_line": next_start,
        "text": "\n".join(bare[:kept]),
        "uri": file_uri(reply.path),
        "notes": list(notes),
    }
    if next_page is not None:
        structured["next_page"] = next_page  # a document's; left out of the schema for room
    if not kept and reply.truncated and reply.start_line <= reply.total_lines:
        # The daemon returns whole lines only: a line longer than its read limit comes
        # back as nothing at all. Say so and point past it, or the model would loop.
        head = (
            f"{reply.path}: line {reply.start_line} alone is longer than kbindex returns "
            "in one read, so it cannot be shown"
        )
        if next_start is not None:
            head += f"; continue with start_line={next_start}"
        head += "."
    elif not kept:
        head = (
            f"{reply.path} has {reply.total_lines} line(s); nothing to show from line "
            f"{reply.start_line}."
        )
    else:
        head = f"{reply.path} lines {reply.start_line}-{end_line} of {reply.total_lines}"
        if reply.hash:
            head += f" (hash {reply.hash}: if_match for a note change)"
        if clipped:
            head += " (line too long, cut short)"
        if next_start is not None:
            head += f" (truncated; continue with start_line={next_start})"
        if reply.pages:
            shown = f"page {reply.page} of {reply.pages}" if reply.page else f"{reply.pages} pages"
            head += f" ({shown}" + (f"; next: page={next_page})" if next_page else ")")
    lines = [head, *numbered[:kept]]
    _notes(lines, notes)
    return structured, "\n".join(lines)


def _page_of(numbered: list[str]) -> int:
    """The page of the last line shown: the last ``[page N]`` row above it."""
    for row in reversed(numbered):
        if found := _PAGE_ROW.fullmatch(row):
            return int(found[1])
    return 1


# ------------------------------------------------------------------ find_files


def _file(info: FileInfo) -> dict[str, Any]:
    # Only what cannot be derived: relpath, root and the URI all follow from the path (the
    # URI is kbindex://file + path), and repeating them fit a third as many files.
    return {"path": info.path, "size": info.size, "last_modified": iso(info.last_modified)}


def find_files(
    reply: FindFilesReply, glob: str, limit: int, max_limit: int, notes: list[str]
) -> tuple[dict[str, Any], str]:
    """A listing within budget; the text names each root once, then paths relative to it."""
    files: list[dict[str, Any]] = []
    lines: list[str] = []
    used_json = used_text = 0
    # Room is left for the frame (counts, glob, notes) so the whole answer fits.
    room = BUDGET - 500
    root = None
    for info in reply.files:
        item = _file(info)
        line = f"  {info.relpath}  {human_size(info.size)}  {item['last_modified'][:10]}"
        if info.note:  # what changed lately: which of it an agent's note request did
            line += "  (written through kbindex)"
        if info.root != root:
            line = f"{info.root.rstrip('/')}/\n{line}"
        cost_json, cost_text = _size(item), len(line) + 1
        if files and (used_json + cost_json > room or used_text + cost_text > room):
            break
        files.append(item)
        lines.append(line)
        root = info.root
        used_json += cost_json
        used_text += cost_text
    omitted = len(reply.files) - len(files)
    truncated = reply.truncated or len(files) < reply.total
    if omitted:
        notes = [*notes, f"{omitted} more file(s) left out to keep this answer small."]
    structured = {
        "glob": glob,
        "files": files,
        "returned": len(files),
        "total": reply.total,
        "truncated": truncated,
        "notes": list(notes),
    }
    if not files:
        text_lines = [
            f"No indexed files match {glob!r}. Globs are relative to the indexed folders "
            "('*' also crosses '/'), e.g. '*.md' or 'docs/*'; absolute paths work too."
        ]
    else:
        text_lines = [f"{reply.total} indexed file(s) match {glob!r}, showing {len(files)}:"]
        text_lines.extend(lines)
        if truncated:
            more = f"{reply.total - len(files)} more: narrow the glob ('docs/', 'docs/*.md')"
            if not omitted and limit < max_limit:
                more += f" or raise limit (max {max_limit})"
            text_lines.append(more + ".")
    _notes(text_lines, notes)
    return structured, "\n".join(text_lines)
