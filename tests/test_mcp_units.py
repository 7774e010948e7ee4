"""The front end's pure parts: lenient arguments, URIs, MIME types, progress, budgets."""

from __future__ import annotations

import logging

import pytest
from kbindex.mcpfront.app import parse_args
from kbindex.mcpfront.arguments import ArgumentError, Arguments
from kbindex.mcpfront.httpserver import transport_security
from kbindex.mcpfront.repeats import RepeatFilter
from kbindex.mcpfront.resources import mime_type, path_of
from kbindex.mcpfront.results import BUDGET, file_uri, freshness_text, read_file, split_numbered
from kbindex.mcpfront.tools import _ProgressTracker
from kbindex.proto.messages import Freshness, Progress, ReadFileReply
from mcp.shared.exceptions import MCPError


@pytest.mark.parametrize(
    ("sent", "read"),
    [(5, 5), ("5", 5), (" 7 ", 7), (5.0, 5), ("5.0", 5), (None, 10), ("", 10), (1000, 100)],
)
def test_integers_are_read_leniently(sent: object, read: int) -> None:
    args = Arguments({"limit": sent}, ["limit"])
    assert args.integer("limit", default=10, minimum=1, maximum=100, clamp_high=True) == read


@pytest.mark.parametrize("sent", ["five", 0, -1, 2.5, True, [1], {"n": 1}, float("nan")])
def test_unusable_integers_are_refused_in_one_sentence(sent: object) -> None:
    args = Arguments({"limit": sent}, ["limit"])
    with pytest.raises(ArgumentError, match=r"^The argument 'limit' must be an integer from 1"):
        args.integer("limit", default=10, minimum=1, maximum=100)


def test_start_positions_below_one_mean_from_the_start() -> None:
    args = Arguments({"start_line": -4}, ["start_line"])
    assert args.integer("start_line", default=None, minimum=1, clamp_low=True) == 1
    assert args.notes == ["start_line=-4 is below 1; used 1."]


def test_strings_unknown_arguments_and_shapes() -> None:
    args = Arguments({"query": 42, "k": 3, "top_k": 1}, ["query", "limit"])
    assert args.string("query", required=True) == "42"
    assert args.notes == ["Ignored unknown argument(s): k, top_k (this tool takes: limit, query)."]
    with pytest.raises(ArgumentError, match="required"):
        Arguments({"query": "   "}, ["query"]).string("query", required=True)
    with pytest.raises(ArgumentError, match="must be a string, not an array"):
        Arguments({"query": ["a"]}, ["query"]).string("query")
    with pytest.raises(ArgumentError, match="too long"):
        Arguments({"query": "x" * 50}, ["query"]).string("query", max_length=10)
    with pytest.raises(ArgumentError, match="JSON object"):
        Arguments(["not", "a", "dict"], ["query"])  # type: ignore[arg-type]
    assert Arguments(None, []).notes == []


@pytest.mark.parametrize("path", ["/home/me/notes/todo.md", "/tmp/a b/späce #1?.md", "/x/100%.txt"])
def test_resource_uris_round_trip(path: str) -> None:
    uri = file_uri(path)
    assert uri.startswith("kbindex://file/")
    assert " " not in uri
    assert "?" not in uri
    assert path_of(uri) == path


def test_resource_uris_cannot_climb_or_be_foreign() -> None:
    assert path_of("kbindex://file/home/me/../../etc/passwd") == "/etc/passwd"
    assert path_of("kbindex://file//etc/passwd") == "/etc/passwd"
    for bad in ("file:///etc/passwd", "kbindex://file/", "kbindex://file/%00x"):
        with pytest.raises(MCPError):
            path_of(bad)


@pytest.mark.parametrize(
    ("name", "mime"),
    [
        ("notes.md", "text/markdown"),
        ("a.txt", "text/plain"),
        ("tool.py", "text/x-python"),
        ("app.ts", "text/x-typescript"),
        ("main.rs", "text/x-rust"),
        ("data.json", "application/json"),
        ("page.html", "text/html"),
        ("Makefile", "text/plain"),
        ("archive.zip", "text/plain"),
        ("README.RST", "text/x-rst"),
    ],
)
def test_mime_types(name: str, mime: str) -> None:
    assert mime_type(f"/kb/{name}") == mime


async def _collect(sent: list[tuple[float, float | None]]) -> _ProgressTracker:
    async def send(value: float, total: float | None, message: str | None) -> None:
        sent.append((value, total))

    return _ProgressTracker(send)


@pytest.mark.anyio
async def test_progress_strictly_increases_across_phases() -> None:
    sent: list[tuple[float, float | None]] = []
    tracker = await _collect(sent)
    for phase, done, total in [
        ("scanning", 0, 0),
        ("scanning", 50, 0),
        ("scanning", 50, 0),
        ("indexing", 0, 10),
        ("indexing", 10, 10),
    ]:
        await tracker.update(Progress(phase=phase, done=done, total=total))
    assert sent == [(0.0, None), (50.0, None), (60.0, 60.0)]


def _reply(text: str, start: int, total: int, truncated: bool = False) -> ReadFileReply:
    end = start + len(text.split("\n")) - 1 if text else start - 1
    return ReadFileReply(
        path="/kb/f.md",
        text=text,
        start_line=start,
        end_line=end,
        total_lines=total,
        truncated=truncated,
    )


def test_numbered_lines_are_split_and_budgeted() -> None:
    numbered, bare = split_numbered(_reply(" 9| nine\n10| \n11| eleven | x", 9, 20))
    assert bare == ["nine", "", "eleven | x"]
    assert numbered[0] == " 9| nine"
    # Unnumbered text (a daemon that changed its format) is numbered here instead.
    numbered, bare = split_numbered(_reply("plain\ntext", 1, 2))
    assert (numbered, bare) == (["1| plain", "2| text"], ["plain", "text"])

    rows = "\n".join(f"{n:>4}| " + "y" * 200 for n in range(1, 1001))
    structured, shown = read_file(_reply(rows, 1, 1000), [])
    assert len(shown) <= BUDGET + 200
    assert len(structured["text"]) <= BUDGET
    assert structured["truncated"] is True
    assert structured["next_start_line"] == structured["end_line"] + 1


def test_http_security_allows_only_our_own_names() -> None:
    settings = transport_security("127.0.0.1", 8751, ["kb.lan:8751"], ["https://app.example"])
    assert settings.enable_dns_rebinding_protection
    assert "127.0.0.1:8751" in settings.allowed_hosts
    assert "localhost:8751" in settings.allowed_hosts
    assert "kb.lan:8751" in settings.allowed_hosts
    assert not any(h.startswith("evil") for h in settings.allowed_hosts)
    assert "http://localhost:*" in settings.allowed_origins
    assert "https://app.example" in settings.allowed_origins
    lan = transport_security("192.168.1.5", 9000)
    assert lan.allowed_hosts == ["192.168.1.5:9000"]
    args = parse_args(["--http", "--port", "0", "--log-level", "debug"])
    assert (args.http, args.port, args.log_level, args.host) == (True, 0, "DEBUG", "127.0.0.1")


def test_a_repeated_log_statement_is_said_once_then_counted() -> None:
    now = [0.0]
    repeats = RepeatFilter(window=60, clock=lambda: now[0])
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    log = logging.getLogger("tests.repeats")
    log.propagate = False

    def refuse(peer: str) -> None:
        log.warning("refused a request from %s", peer)  # one statement, many texts

    handler = Keep()
    handler.addFilter(repeats)
    log.addHandler(handler)
    try:
        for n in range(10_000):
            refuse(f"peer {n}")
        log.warning("something else")
        now[0] = 30.0
        repeats.flush()
        assert records == [
            "refused a request from peer 0",
            "something else",
            "refused a request from peer 0 [repeated 9999 more times in 30 s]",
        ]
        refuse("peer x")  # still counted, not said
        now[0] = 90.0
        repeats.flush()
        repeats.flush()  # quiet for a window: forgotten
        refuse("peer y")
        assert records[3:] == [
            "refused a request from peer 0 [repeated 1 more times in 60 s]",
            "refused a request from peer y",
        ]
    finally:
        log.removeHandler(handler)


def test_an_answer_from_an_index_being_rebuilt_says_so() -> None:
    why = "the index was made by an older kbindexd (schema version 8, now 9)"
    text = freshness_text(Freshness(last_scan_at=None, rebuilding=why))
    assert f"the index is being rebuilt ({why}), results may be out of date" in text
    assert "rebuilt" not in freshness_text(Freshness(last_scan_at=None))


def test_freshness_names_the_machines_of_a_shared_index_that_are_behind_or_gone() -> None:
    from kbindex.mcpfront.results import freshness_text
    from kbindex.proto.messages import Freshness

    text = freshness_text(Freshness(machines_behind=["alpha"], machines_gone=["beta", "old"]))
    assert "machine(s) behind: alpha" in text
    assert "machine(s) gone, rows may be stale: beta, old" in text
    assert "machine" not in freshness_text(Freshness())
