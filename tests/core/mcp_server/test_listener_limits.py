"""The limits every ipybox HTTP listener shares (``ipybox_core._http_limits``), on real sockets.

A real :class:`HttpListener` (uvicorn's HTTP/1.1 protocol under the limits) on a loopback port,
attacked by clients that never finish their headers, trickle them a byte at a time, hold idle
connections, or send the same bad request again and again. Each control swaps the bounded protocol
for uvicorn's plain one (or drops the log filter) and shows the attack working.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from ipybox_core import _http_listener
from ipybox_core._http_limits import (
    ListenerLimits,
    RepeatFilter,
    descriptor_budget_limits,
    plain_refusal,
    repeats_limited,
)
from ipybox_core._http_listener import HttpListener
from prerequisites import require

GET = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


class App:
    """``/`` answers ``ok``; ``/slow`` answers once :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.slow = 0
        """``/slow`` requests that reached the application."""
        self._arrived = asyncio.Event()

    async def handling(self, count: int) -> None:
        """Return once ``count`` ``/slow`` requests are being handled (their connections no longer wait)."""
        while self.slow < count:
            self._arrived.clear()
            await asyncio.wait_for(self._arrived.wait(), 60)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/slow":
            self.slow += 1
            self._arrived.set()
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def listen() -> AsyncIterator[Callable[..., Any]]:
    """Start a listener with the given limits; returns its port (all are stopped afterwards)."""
    started: list[HttpListener] = []

    async def start(limits: ListenerLimits, app: App | None = None, **options: Any) -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        listener = HttpListener(app or App(), limits, refusal=plain_refusal("full"), **options)
        await listener.start(sock)
        started.append(listener)
        return port

    yield start
    for listener in started:
        await listener.stop()


@pytest.fixture
def plain_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: uvicorn's own HTTP/1.1 protocol, without the limits."""
    monkeypatch.setattr(_http_listener, "bounded_h11", lambda limits, **_: H11Protocol)


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """Whether the server closes the connection within ``within`` seconds (nothing is answered)."""
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def request(port: int, head: bytes = GET) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    answer = await asyncio.wait_for(reader.readuntil(b"ok"), 60)
    writer.close()
    return answer


# --- header timeout -------------------------------------------------------------------------------


async def trickle(port: int, seconds: float) -> bool:
    """A request head sent a byte every 0.1 s and never finished: whether the server hung up
    within ``seconds``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while loop.time() < deadline:
            try:
                writer.write(b"X")
                await writer.drain()
            except ConnectionError:
                return True
            if await closed_by_server(reader, 0.1):
                return True
        return False
    finally:
        writer.close()


async def test_headers_must_be_complete_within_the_header_timeout(listen: Callable[..., Any]) -> None:
    port = await listen(ListenerLimits(16, header_timeout=0.5))
    _, silent = await asyncio.open_connection("127.0.0.1", port)
    assert await trickle(port, seconds=60)  # bytes that trickle in do not extend it
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\n")
    assert await closed_by_server(reader, 60)
    assert b"ok" in await request(port)  # a complete request is served
    silent.close()


@pytest.mark.usefixtures("plain_protocol")
async def test_control_the_plain_protocol_keeps_a_trickling_connection(listen: Callable[..., Any]) -> None:
    port = await listen(ListenerLimits(16, header_timeout=0.5))
    assert not await trickle(port, seconds=3.0)


async def test_an_idle_keep_alive_connection_gets_the_same_deadline(listen: Callable[..., Any]) -> None:
    port = await listen(ListenerLimits(16, header_timeout=0.5), timeout_keep_alive=3600)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(GET)
    await asyncio.wait_for(reader.readuntil(b"ok"), 60)
    assert await closed_by_server(reader, 60)
    writer.close()


async def test_a_tls_handshake_must_finish_within_the_header_timeout(
    listen: Callable[..., Any], tmp_path: Path
) -> None:
    require(shutil.which("openssl") is not None, "openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    limits = ListenerLimits(16, header_timeout=0.5)
    port = await listen(limits, certfile=str(cert), keyfile=str(key))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # TCP only: no ClientHello
    assert await closed_by_server(reader, 60)  # asyncio's own default would wait 60 s
    writer.close()
    context = ssl.create_default_context(cafile=str(cert))
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(GET)
    assert b"ok" in await asyncio.wait_for(reader.readuntil(b"ok"), 60)
    writer.close()


# --- connection caps ------------------------------------------------------------------------------


async def open_idle(port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections that send an unfinished head and wait."""
    pairs = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: test\r\n")
        pairs.append((reader, writer))
    return pairs


async def still_open(pairs: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> int:
    """How many of ``pairs`` the server has not closed (each is given a moment to show it)."""
    closed = await asyncio.gather(*(closed_by_server(reader, 0.5) for reader, _ in pairs))
    return closed.count(False)


async def test_waiting_connections_cannot_crowd_out_requests(listen: Callable[..., Any]) -> None:
    app = App()
    port = await listen(ListenerLimits(16, header_timeout=3600, max_waiting=4), app)
    # a request being handled (as an authenticated client's long call would be)
    slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", port)
    slow_writer.write(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
    await app.handling(1)
    flood = await open_idle(port, 100)
    assert await still_open(flood) <= 4
    assert b"ok" in await request(port)  # a new client is served
    app.release.set()
    assert b"ok" in await asyncio.wait_for(slow_reader.readuntil(b"ok"), 60)  # never evicted
    for _, writer in [*flood, (slow_reader, slow_writer)]:
        writer.close()


@pytest.mark.usefixtures("plain_protocol")
async def test_control_the_plain_protocol_holds_every_waiting_connection(listen: Callable[..., Any]) -> None:
    port = await listen(ListenerLimits(16, header_timeout=3600, max_waiting=4))
    flood = await open_idle(port, 100)
    assert await still_open(flood) == 100
    for _, writer in flood:
        writer.close()


async def test_connections_beyond_the_cap_are_refused_at_once(listen: Callable[..., Any]) -> None:
    app = App()
    port = await listen(ListenerLimits(4, header_timeout=3600), app)
    busy = []
    for _ in range(4):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
        busy.append((reader, writer))
    await app.handling(4)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await asyncio.wait_for(reader.read(), 60)
    assert answer.startswith(b"HTTP/1.1 503") and answer.endswith(b"full\n")
    app.release.set()
    for reader, writer in busy:
        assert b"ok" in await asyncio.wait_for(reader.readuntil(b"ok"), 60)
        writer.close()


def test_the_service_limits_follow_the_open_file_limit() -> None:
    at_256 = descriptor_budget_limits(10.0, soft_limit=256)
    assert (at_256.max_connections, at_256.max_waiting, at_256.backlog) == (64, 16, 16)
    at_1024 = descriptor_budget_limits(10.0, soft_limit=1024)
    assert (at_1024.max_connections, at_1024.max_waiting) == (256, 64)
    assert descriptor_budget_limits(10.0, soft_limit=1 << 20).max_connections == 1024
    with pytest.raises(ValueError, match="max_waiting"):
        ListenerLimits(4, 1.0, max_waiting=5)


# --- repeated log lines ---------------------------------------------------------------------------


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def uvicorn_error_log() -> Any:
    records = Records()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(records)
    yield records
    logger.removeHandler(records)


async def send_garbage(port: int, count: int) -> None:
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        assert b" 400 " in await asyncio.wait_for(reader.read(), 60)
        writer.close()


@pytest.mark.parametrize("filtered", [True, False], ids=["filtered", "control-unfiltered"])
async def test_a_bad_request_flood_writes_one_line(
    listen: Callable[..., Any], uvicorn_error_log: Records, filtered: bool
) -> None:
    port = await listen(ListenerLimits(16, header_timeout=10))
    if filtered:
        with repeats_limited("uvicorn.error"):
            await send_garbage(port, 200)
    else:
        await send_garbage(port, 200)
    invalid = [m for m in uvicorn_error_log.messages if m.startswith("Invalid HTTP request")]
    assert len(invalid) == (1 if filtered else 200)


def test_repeats_are_counted_in_the_next_line_let_through() -> None:
    now = [0.0]
    repeat = RepeatFilter(60.0, max_messages=2, clock=lambda: now[0])

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("x", logging.WARNING, __file__, 1, msg, args, None)

    first = record("bad host %s", "a")
    assert repeat.filter(first) and first.getMessage() == "bad host a"
    assert not any(repeat.filter(record("bad host %s", str(i))) for i in range(5))
    assert repeat.filter(record("other"))
    assert not repeat.filter(record("a third kind"))  # more kinds than tracked: left out, counted
    now[0] = 61.0
    later = record("bad host %s", "z")
    assert repeat.filter(later)
    assert later.getMessage() == (
        "bad host z (5 more like it in the last 60 s were not logged; "
        "1 other repeated messages were not logged)"
    )
