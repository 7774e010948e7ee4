"""The wire protocol, over a real socket: framing, errors as replies, multiplexing."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Awaitable
from pathlib import Path

import anyio
import msgspec
import pytest
from conftest import Daemon, write
from hypothesis import given
from hypothesis import strategies as st
from kbindex.proto import framing, streams
from kbindex.proto.client import Client, ConnectionLost, DaemonError
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    AnyRequest,
    ErrorReply,
    Hello,
    HelloReply,
    Pong,
    SearchReply,
    StatusReply,
)
from raw_socket import RawConnection

pytestmark = pytest.mark.anyio


@given(st.binary(max_size=4096))
def test_frame_round_trip(body: bytes) -> None:
    async def main() -> bytes | None:
        send, receive = anyio.create_memory_object_stream[bytes](5000)

        packed = framing.pack(body)
        # Deliver the frame in awkward pieces: the reader must reassemble it.
        for i in range(0, len(packed), 3):
            send.send_nowait(packed[i : i + 3])
        send.close()
        async with receive:
            reader = streams.FrameReader(receive, max_size=8192)  # type: ignore[arg-type]
            first = await reader.read()
            assert await reader.read() is None
        return first

    assert anyio.run(main) == body


async def test_frames_written_together_arrive_whole_and_in_order(tmp_path: Path) -> None:
    # Over a real socket: a frame larger than its buffers is written in part at once,
    # the rest through the stream; frames written meanwhile, while the reader drains
    # the socket bit by bit, wait behind it, never inside it.
    bodies = [b"x" * (4 << 20), b"small", b"y" * 300_000, b"tiny"]
    data = bytearray()
    path = tmp_path / "s.sock"
    async with await anyio.create_unix_listener(path) as listener:

        async def drain() -> None:
            async with await listener.accept() as conn:
                await anyio.sleep(0.2)  # the first frame fills the buffers meanwhile
                with contextlib.suppress(anyio.EndOfStream):
                    while True:
                        data.extend(await conn.receive(1 << 16))
                        await anyio.sleep(0.001)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            async with await anyio.connect_unix(path) as stream:
                writer = streams.FrameWriter(stream, timeout=10)
                with anyio.fail_after(10):
                    async with anyio.create_task_group() as writers:
                        writers.start_soon(writer.write, bodies[0])
                        await anyio.sleep(0.25)  # being read, and still being written
                        for body in bodies[1:]:
                            writers.start_soon(writer.write, body)
                            await anyio.sleep(0.005)
    received = []
    while data:
        (size,) = struct.unpack_from(">I", data)
        received.append(bytes(data[4 : 4 + size]))
        del data[: 4 + size]
    assert received == bodies


async def test_requests_in_flight_end_with_connection_lost_when_the_daemon_goes(
    tmp_path: Path,
) -> None:
    # The peer is a stand-in for a daemon that goes away mid-request, which a real one
    # does only by crashing: it answers the handshake, takes the requests and closes.
    # Whether a caller waits for the final reply or follows the progress, it must get
    # ConnectionLost at once, not wait for ever.
    path = tmp_path / "s.sock"
    requests = msgspec.msgpack.Decoder(AnyRequest)
    async with await anyio.create_unix_listener(path) as listener:

        async def vanishing_daemon() -> None:
            async with await listener.accept() as conn:
                reader, writer = streams.FrameReader(conn, 1 << 20), streams.FrameWriter(conn)
                hello = requests.decode(await reader.read() or b"")
                reply = HelloReply(id=hello.id, version=PROTOCOL_VERSION, server="stand-in")
                await writer.write(msgspec.msgpack.encode(reply))
                for _ in range(2):
                    await reader.read()

        async with anyio.create_task_group() as tg:
            tg.start_soon(vanishing_daemon)
            lost: list[type[BaseException]] = []

            async def call(request: Awaitable[object]) -> None:
                try:
                    await request
                except Exception as exc:
                    lost.append(type(exc))

            async def follow(c: Client) -> None:
                async for _ in c.refresh_wait():
                    pass

            with anyio.fail_after(10):
                async with Client.connect(path) as c, anyio.create_task_group() as calls:
                    calls.start_soon(call, c.ping())
                    calls.start_soon(call, follow(c))
    assert lost == [ConnectionLost, ConnectionLost]


async def test_malformed_frames_get_error_replies_and_the_connection_stays(
    daemon: Daemon,
) -> None:
    conn = RawConnection(daemon.socket)
    try:
        conn.send_raw(framing.pack(b"\xc1 not msgpack"))
        reply = conn.recv()
        assert isinstance(reply, ErrorReply) and reply.code == "bad_frame"

        conn.send({"op": "launch_rockets", "id": 7})
        reply = conn.recv()
        assert isinstance(reply, ErrorReply) and reply.code == "unknown_op" and reply.id == 7

        conn.send({"op": "search", "id": 8, "query": 42})
        reply = conn.recv()
        assert isinstance(reply, ErrorReply)
        assert (reply.code, reply.id) == ("invalid_argument", 8)

        conn.send({"op": "search", "id": 9, "query": "x", "limit": 1000})
        reply = conn.recv()
        assert isinstance(reply, ErrorReply)
        assert (reply.code, reply.id) == ("invalid_argument", 9)
        assert "limit" in reply.message

        conn.send([1, 2, 3])
        assert isinstance(conn.recv(), ErrorReply)

        # Unknown extra fields are ignored (newer clients talking to this daemon).
        conn.send({"op": "ping", "id": 10, "from_the_future": True})
        reply = conn.recv()
        assert isinstance(reply, Pong) and reply.id == 10
    finally:
        conn.close()


async def test_oversize_frame_gets_an_error_then_close_and_others_are_served(
    daemon: Daemon,
) -> None:
    bad = RawConnection(daemon.socket)
    async with daemon.client() as good:
        bad.send_raw(struct.pack(">I", 0xFFFFFFF0) + b"xx")
        reply = bad.recv()
        assert isinstance(reply, ErrorReply) and reply.code == "frame_too_large"
        assert bad.closed_by_peer()
        assert isinstance(await good.ping(), Pong)
    bad.close()


async def test_truncated_frame_and_silent_client_do_not_block_others(daemon: Daemon) -> None:
    stuck = RawConnection(daemon.socket)
    stuck.send_raw(struct.pack(">I", 100) + b"only part")
    async with daemon.client() as c:
        with anyio.fail_after(5):
            assert isinstance(await c.status(), StatusReply)
    stuck.close()


async def test_version_mismatch_is_a_clear_error(daemon: Daemon) -> None:
    conn = RawConnection(daemon.socket)
    try:
        conn.send(Hello(id=1, version=PROTOCOL_VERSION + 1, client="future"))
        reply = conn.recv()
        assert isinstance(reply, ErrorReply) and reply.code == "version_mismatch"
        assert str(PROTOCOL_VERSION) in reply.message
    finally:
        conn.close()


async def test_many_requests_in_flight_on_one_connection(daemon: Daemon) -> None:
    for i in range(20):
        write(daemon.root / f"doc{i}.md", f"common unique{i}\n")
    await daemon.refresh()
    results: dict[int, list[str]] = {}
    async with daemon.client() as c:

        async def one(i: int) -> None:
            reply = await c.search(f"unique{i}")
            results[i] = [h.relpath for h in reply.hits]

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
    assert results == {i: [f"doc{i}.md"] for i in range(20)}


async def test_errors_come_back_as_daemon_errors(daemon: Daemon) -> None:
    async with daemon.client() as c:
        with pytest.raises(DaemonError) as info:
            await c.search("foo AND (", mode="raw")
        assert info.value.code == "bad_query"
        with pytest.raises(DaemonError) as info:
            await c.search("x", mode="fuzzy")
        assert info.value.code == "bad_query"
        with pytest.raises(DaemonError) as info:
            await c.read_file("/etc/passwd")
        assert info.value.code == "outside_roots"
        with pytest.raises(DaemonError) as info:
            await c.read_file("../../etc/passwd")
        assert info.value.code == "outside_roots"
        with pytest.raises(DaemonError) as info:
            await c.read_file("bad\x00name")
        assert info.value.code == "invalid_argument"
        # The connection is still usable after every error.
        assert isinstance(await c.search("anything"), SearchReply)


async def test_client_reports_daemon_not_running(sockdir: object) -> None:
    from kbindex.proto.client import DaemonUnavailable

    with pytest.raises(DaemonUnavailable, match="not running"):
        async with Client.connect(f"{sockdir}/nobody.sock"):
            pass
