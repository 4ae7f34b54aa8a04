"""The ``allow_hosts`` proxy bounds what the sandboxed code (its only client) can cost the host.

The real proxy on a real loopback port, attacked as sandboxed code would: a request head that
trickles in a byte at a time and never ends (slowloris), and a flood of connections that send
nothing. Each attack has a control: the old head reader (a timeout per ``recv``, which every
trickled byte renews) keeps the slowloris connection open, and without the cap every idle
connection holds a thread of the application.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ipybox_core._http_limits import ListenerLimits
from ipybox_core.sandbox import _proxy
from ipybox_core.sandbox._proxy import FilteringProxy, HostFilter

HEADER_TIMEOUT = 1.0


@pytest.fixture
def target() -> Iterator[int]:
    """A service on loopback that answers ``reached`` to every connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"reached")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


def start_proxy(
    target: int, max_connections: int = 8, header_timeout: float = HEADER_TIMEOUT
) -> FilteringProxy:
    limits = ListenerLimits(max_connections=max_connections, header_timeout=header_timeout)
    return FilteringProxy(HostFilter([f"127.0.0.1:{target}"]), limits=limits)


def reach(proxy: FilteringProxy, target: int) -> bytes:
    """``CONNECT`` to the target through the proxy: the proxy's answer and what the target sent."""
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as client:
        client.sendall(f"CONNECT 127.0.0.1:{target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while (chunk := client.recv(4096)) and b"reached" not in data:
            data += chunk
    return data


def trickle_until_closed(proxy: FilteringProxy, seconds: float) -> bool:
    """Send a never-ending request head a byte at a time for up to ``seconds``: whether the proxy
    closed the connection meanwhile."""
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
        sock.sendall(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                return True
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                try:
                    return sock.recv(4096) == b""
                except ConnectionResetError:
                    return True
    return False


def test_a_trickling_request_head_is_closed_at_the_header_timeout(target: int) -> None:
    proxy = start_proxy(target)
    try:
        assert trickle_until_closed(proxy, seconds=60)
        assert reach(proxy, target).endswith(b"reached")  # the proxy still works
    finally:
        proxy.close()


def test_control_with_a_timeout_per_recv_the_trickle_keeps_the_connection(
    target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def per_recv_timeout(client: socket.socket, deadline: float) -> tuple[bytes, bytes]:
        data = b""
        client.settimeout(HEADER_TIMEOUT)  # renewed by every byte
        while b"\r\n\r\n" not in data:
            chunk = client.recv(4096)
            if not chunk:
                raise ValueError("incomplete request head")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", rest

    monkeypatch.setattr(_proxy, "_read_head", per_recv_timeout)
    proxy = start_proxy(target)
    try:
        assert not trickle_until_closed(proxy, seconds=4 * HEADER_TIMEOUT)
    finally:
        proxy.close()


def idle_flood(proxy: FilteringProxy, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing and stay open."""
    assert proxy.port is not None
    return [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(count)]


def refused(socks: list[socket.socket], expected: int) -> int:
    """Wait (up to 30 s) until ``expected`` of ``socks`` were answered ``503``; how many were."""
    answered = 0
    pending = list(socks)
    deadline = time.monotonic() + 30
    while answered < expected and time.monotonic() < deadline:
        readable, _, _ = select.select(pending, [], [], 0.1)
        for sock in readable:
            pending.remove(sock)
            answered += sock.recv(4096).startswith(b"HTTP/1.1 503")
    return answered


def threads_over(before: int, at_least: int) -> int:
    """Threads started since ``before`` was counted, once ``at_least`` are there (or after 30 s)."""
    deadline = time.monotonic() + 30
    while threading.active_count() - before < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count() - before


@pytest.mark.parametrize("cap", [8, 10_000], ids=["capped", "control-uncapped"])
def test_a_flood_of_idle_connections_holds_at_most_the_cap(target: int, cap: int) -> None:
    proxy = start_proxy(target, max_connections=cap, header_timeout=120)  # the idle ones stay
    before = threading.active_count()
    socks = idle_flood(proxy, 40)
    try:
        if cap == 8:
            assert refused(socks, 40 - 8) == 40 - 8
            held = threading.active_count() - before
            assert held <= 8, f"{held} threads held for 40 idle connections"
        else:  # the control: every idle connection holds a thread of the application
            assert threads_over(before, 40) >= 40
    finally:
        for sock in socks:
            sock.close()
        deadline = time.monotonic() + 30
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
    assert reach(proxy, target).endswith(b"reached")
    proxy.close()
