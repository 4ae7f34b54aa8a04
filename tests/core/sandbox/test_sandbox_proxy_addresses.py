"""The ``allow_hosts`` proxy refuses every spelling of the host's own addresses behind an allowed name.

An attacker who controls the DNS of an allowed ``*.domain`` answers with ``::ffff:127.0.0.1``
(IPv4-mapped: Python < 3.13 does not call it loopback) or spells loopback so that ``getaddrinfo``
turns it into ``127.0.0.1`` (``127.1``, ``0x7f.1``, ``2130706433``). Runs the real proxy over real
sockets; no bubblewrap needed. The control weakens the check and the same request reaches the host.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ipybox_core.sandbox import _proxy
from ipybox_core.sandbox._proxy import FilteringProxy, HostFilter, reaches_host_itself

LOCAL = [
    "127.0.0.1",
    "127.0.0.2",
    "::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::127.0.0.1",
    "0.0.0.0",
    "0.1.2.3",
    "::",
    "::ffff:0.0.0.0",
    "169.254.169.254",
    "::ffff:169.254.169.254",
    "fe80::1",
    "fe80::1%lo",
]
REMOTE = ["93.184.216.34", "::ffff:93.184.216.34", "2606:4700:4700::1111", "10.0.0.1", "192.168.1.1"]


@pytest.mark.parametrize("address", LOCAL)
def test_local_addresses_in_every_spelling_are_recognised(address: str) -> None:
    assert reaches_host_itself(address)


@pytest.mark.parametrize("address", REMOTE)
def test_other_addresses_are_not(address: str) -> None:
    assert not reaches_host_itself(address)


def test_literal_spellings_of_an_allowed_ip_are_not_allowed_by_the_filter() -> None:
    allowed = HostFilter(["127.0.0.1:8080", "*.attack.test:8080"])
    assert allowed.allows("127.0.0.1", 8080) and allowed.allows("evil.attack.test", 8080)
    for spelling in ("::ffff:127.0.0.1", "::ffff:7f00:1", "127.1", "0x7f.1", "2130706433", "127.0.0.2"):
        assert not allowed.allows(spelling, 8080), spelling


@pytest.fixture
def target() -> Iterator[int]:
    """A host service on loopback that answers ``reached`` to every connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = False

    def serve() -> None:
        while not stop:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"reached")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop = True
        thread.join(2)
        server.close()


@pytest.fixture
def attacker_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mapped.attack.test`` resolves to ``::ffff:127.0.0.1`` (the attacker runs the zone's DNS)."""
    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "mapped.attack.test":
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:127.0.0.1", port, 0, 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def connect_through(proxy: FilteringProxy, authority: str) -> bytes:
    """``CONNECT authority`` through the proxy; the proxy's answer and whatever the target sent."""
    assert proxy.port is not None
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
        client.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        data = b""
        while chunk := client.recv(4096):
            data += chunk
            if b"reached" in data:
                break
    return data


SPELLINGS = ["mapped.attack.test", "127.1", "0x7f.1", "2130706433", "0177.0.0.1"]


@pytest.mark.usefixtures("attacker_dns")
@pytest.mark.parametrize("host", SPELLINGS)
def test_the_proxy_refuses_local_addresses_behind_allowed_names(target: int, host: str) -> None:
    proxy = FilteringProxy(HostFilter([f"*.attack.test:{target}", *(f"{h}:{target}" for h in SPELLINGS)]))
    try:
        answer = connect_through(proxy, f"{host}:{target}")
    finally:
        proxy.close()
    assert answer.startswith(b"HTTP/1.1 403") and b"local address" in answer and b"reached" not in answer


@pytest.mark.usefixtures("attacker_dns")
def test_control_without_the_check_the_mapped_address_reaches_the_host(
    target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_proxy, "reaches_host_itself", lambda address: False)
    proxy = FilteringProxy(HostFilter([f"*.attack.test:{target}"]))
    try:
        answer = connect_through(proxy, f"mapped.attack.test:{target}")
    finally:
        proxy.close()
    assert answer.startswith(b"HTTP/1.1 200") and b"reached" in answer
