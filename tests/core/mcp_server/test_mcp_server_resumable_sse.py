"""Resumable SSE responses of ``ipybox mcp`` over Streamable HTTP (``_events``).

A real ``ipybox mcp --transport streamable-http`` process, the MCP SDK's client, and a TCP proxy
between them that can stall a connection (hold what the server sends) and then cut it. The code
prints, waits for the test, prints again: the test stalls the call's connection after the first
print, lets the code finish, waits until the proxy holds the result (so the rest was sent on the
broken connection only), and cuts. The SDK's client reconnects with ``Last-Event-ID`` and must
get the rest, exactly once. On the old code (no event store) the response has no event ids, the
client cannot resume, and the call fails.

Also: a ``Last-Event-ID`` from another MCP session replays nothing (each session has its own
store), and the store keeps to its bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from mcp_server_kit import INITIALIZE_2025_11, HttpIpybox, http_client, start_http_ipybox, text_of
from mcp_types import JSONRPCNotification

from ipybox_core.mcp_server._events import RETRY_MS, SessionEventStore


class Proxy:
    """A loopback TCP proxy; a connection that sent ``marker`` can be stalled, then cut."""

    def __init__(self, target: tuple[str, int], marker: bytes) -> None:
        self.target = target
        self.marker = marker
        self.port = 0
        self._stall = asyncio.Event()
        self._held = bytearray()
        self._grew = asyncio.Event()
        self._marked: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def stall(self) -> None:
        """From now on, what the server sends on the marked connection is held, not forwarded."""
        self._stall.set()

    async def holding(self, data: bytes) -> None:
        """Return once the held bytes contain ``data``."""
        while data not in self._held:
            self._grew.clear()
            await asyncio.wait_for(self._grew.wait(), 120)

    def cut(self) -> bytes:
        """Close the marked connection on both sides; the bytes it held are lost."""
        for client, upstream in self._marked:
            for writer in (client, upstream):
                writer.transport.abort()
        return bytes(self._held)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        marked = asyncio.Event()

        async def upward() -> None:
            while data := await reader.read(65536):
                if self.marker in data and not self._marked:
                    self._marked.append((writer, up_writer))
                    marked.set()
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downward() -> None:
            while data := await up_reader.read(65536):
                if marked.is_set() and self._stall.is_set():
                    self._held += data
                    self._grew.set()
                    continue
                writer.write(data)
                await writer.drain()
            writer.close()

        with contextlib.suppress(OSError):
            await asyncio.gather(upward(), downward())


@pytest.fixture(scope="module")
def ipybox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    server = start_http_ipybox(tmp_path_factory.mktemp("resume") / "ws", "--yes", "--warm-sessions", "0")
    yield server
    server.stop()


@contextlib.asynccontextmanager
async def gate() -> AsyncIterator[tuple[int, asyncio.Future[asyncio.StreamWriter]]]:
    """A port the code connects to and blocks on until the test writes a byte."""
    connected: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set_result(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], connected
    finally:
        server.close()


CODE = """\
import socket
print("first", flush=True)
_gate = socket.create_connection(("127.0.0.1", {port}))
_gate.recv(1)
_gate.close()
print("second", flush=True)
"""


def port_of(server: HttpIpybox) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/", 1)[0])


async def test_a_broken_stream_resumes_with_the_rest_exactly_once(ipybox: HttpIpybox) -> None:
    progress: list[str] = []
    first = asyncio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if "first" in "".join(progress):
            first.set()

    async with Proxy(("127.0.0.1", port_of(ipybox)), b"execute_code") as proxy, gate() as (port, connected):
        client = http_client(f"http://127.0.0.1:{proxy.port}/mcp", ipybox.token)
        async with client:
            call = asyncio.create_task(
                client.call_tool(
                    "execute_code", {"code": CODE.format(port=port)}, progress_callback=on_progress
                )
            )
            await asyncio.wait_for(first.wait(), 120)
            proxy.stall()
            (await asyncio.wait_for(connected, 120)).write(b"x")
            await proxy.holding(b'"result"')
            lost = proxy.cut()
            result = await asyncio.wait_for(call, 120)
    assert b"second" in lost and b"retry: " + str(RETRY_MS).encode() not in lost  # only the rest was held
    assert not result.is_error, result
    assert progress == ["first\n", "second\n"]  # each printed chunk once, in order
    assert text_of(result) == "first\nsecond"


async def test_every_sse_response_starts_with_a_priming_event(ipybox: HttpIpybox) -> None:
    async with httpx.AsyncClient(timeout=120) as http, _session(http, ipybox) as headers:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        response = await http.post(ipybox.url, json=body, headers=headers)
        first_event = response.text.replace("\r\n", "\n").split("\n\n", 1)[0]
    assert response.headers["content-type"].startswith("text/event-stream")
    fields = dict(line.partition(":")[::2] for line in first_event.splitlines())
    fields = {name: value.strip() for name, value in fields.items()}
    assert fields.get("retry") == str(RETRY_MS) and fields.get("id") and fields.get("data", "") == "", (
        first_event
    )


async def test_an_event_id_of_another_session_replays_nothing(ipybox: HttpIpybox) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        async with _session(http, ipybox) as first:
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            listed = await http.post(ipybox.url, json=body, headers=first)
            ids = [line[4:].strip() for line in listed.text.splitlines() if line.startswith("id: ")]
            assert len(ids) == 2 and "execute_code" in listed.text  # priming event, then the result
            # the same session resumes after its priming event: it gets the result again (the
            # stream then stays open for the request's further events: read until the result)
            again = {**first, "Last-Event-ID": ids[0]}
            async with http.stream("GET", ipybox.url, headers=again) as replayed:
                async for line in replayed.aiter_lines():
                    if "execute_code" in line:
                        break
                else:
                    raise AssertionError("the replay ended without the result")
        async with _session(http, ipybox) as second:
            stolen = await http.get(ipybox.url, headers={**second, "Last-Event-ID": ids[0]})
    assert stolen.status_code == 200 and "execute_code" not in stolen.text, stolen.text


@contextlib.asynccontextmanager
async def _session(http: httpx.AsyncClient, server: HttpIpybox) -> AsyncIterator[dict[str, str]]:
    """A 2025-11-25 MCP session opened by hand; the headers its requests carry."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {server.token}"}
    response = await http.post(server.url, json=INITIALIZE_2025_11, headers=headers)
    assert response.status_code == 200, response.text
    session = {
        **headers,
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "Mcp-Protocol-Version": "2025-11-25",
    }
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(server.url, json=done, headers=session)
    try:
        yield session
    finally:
        await http.delete(server.url, headers=session)


async def test_a_session_store_keeps_to_its_bounds() -> None:
    store = SessionEventStore(max_events=3, max_bytes=10_000)
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"x": "y"})
    ids = [await store.store_event("7", note) for _ in range(5)]
    assert store.count == 3
    replayed: list[Any] = []

    async def collect(event: Any) -> None:
        replayed.append(event.event_id)

    assert await store.replay_events_after(ids[0], collect) is None  # dropped: nothing to resume from
    assert await store.replay_events_after(ids[2], collect) == "7" and replayed == ids[3:]

    big = JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "z" * 4000})
    small = SessionEventStore(max_events=100, max_bytes=10_000)
    for _ in range(5):
        await small.store_event("8", big)
    assert small.count == 2 and small.size <= 10_000
    huge = JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "z" * 20_000})
    await small.store_event("8", huge)
    assert small.count == 1  # the newest event is kept whatever its size


def test_event_ids_are_not_shared_between_stores() -> None:
    async def first_ids() -> tuple[str, str]:
        note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={})
        return await SessionEventStore().store_event("1", note), await SessionEventStore().store_event(
            "1", note
        )

    a, b = asyncio.run(first_ids())
    assert a != b
