"""The host side of ``allow_hosts``: a filtering HTTP proxy (``CONNECT`` and plain HTTP) per kernel.

The sandbox has no network of its own. Its HTTP clients talk to ``HTTP(S)_PROXY`` (a forwarder inside
the sandbox on Linux, this proxy's loopback port on macOS); this proxy, in a background thread of the
application, resolves and connects only to the allowed ``host[:port]`` entries. A host *name* that
resolves to a loopback or link-local address is refused, so allowing a name never opens the host's
own services; loopback is reachable only through an explicitly allowed IP literal.

The sandboxed code is the proxy's only client, and it is not trusted: what it can cost the
application is bounded by :data:`PROXY_LIMITS` (a request head must arrive in full within
``header_timeout`` seconds, whatever trickles in; at most ``max_connections`` connections, tunnels
included, are open at once, and more are answered ``503`` and closed).
"""

from __future__ import annotations

import contextlib
import fnmatch
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ipybox_core._http_limits import ListenerLimits

PROXY_LIMITS = ListenerLimits(max_connections=64, header_timeout=10.0)
"""One kernel's proxy: connections open at once (each tunnel also holds an upstream connection and
two threads) and the seconds a connection has to send its request head."""
_HEAD_LIMIT = 64 * 1024
_DEFAULT_PORTS = (80, 443)
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")


class HostFilter:
    """``host``, ``host:port`` and ``*.domain[:port]`` patterns; without a port, 80 and 443."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._rules: list[tuple[str, tuple[int, ...]]] = []
        for pattern in patterns:
            host, _, port = pattern.rpartition(":") if ":" in pattern else (pattern, "", "")
            self._rules.append((host.lower(), (int(port),) if port else _DEFAULT_PORTS))

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        for pattern, ports in self._rules:
            wildcard = pattern.startswith("*.") and fnmatch.fnmatchcase(host, pattern)
            if port in ports and (host == pattern or wildcard):
                return True
        return False


class FilteringProxy:
    """One kernel's proxy, listening on a unix socket (``unix_path``) or on ``127.0.0.1`` (a free port).

    ``alive`` is polled about twice a second; when it returns False (the kernel's runtime directory is
    gone) the proxy stops by itself.
    """

    def __init__(
        self,
        allowed: HostFilter,
        *,
        unix_path: Path | None = None,
        alive: Callable[[], bool] = lambda: True,
        limits: ListenerLimits = PROXY_LIMITS,
    ) -> None:
        self._allowed = allowed
        self._limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._alive = alive
        self._stop = threading.Event()
        if unix_path is not None:
            unix_path.unlink(missing_ok=True)
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(str(unix_path))
            unix_path.chmod(0o666)  # the sandbox may run under another uid mapping
        else:
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listener.bind(("127.0.0.1", 0))
        self.unix_path = unix_path
        self.port: int | None = None if unix_path is not None else self._listener.getsockname()[1]
        self._listener.listen(64)
        self._listener.settimeout(0.5)
        self._thread = threading.Thread(target=self._serve, name="ipybox-sandbox-proxy", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop accepting connections (tunnels already open run until either side closes)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(2)

    def _serve(self) -> None:
        try:
            while not self._stop.is_set() and self._alive():
                try:
                    client, _ = self._listener.accept()
                except (TimeoutError, OSError):
                    continue
                if not self._slots.acquire(blocking=False):
                    _refuse(client, 503, self._too_many(), timeout=1)
                    client.close()
                    continue
                threading.Thread(target=self._handle_counted, args=(client,), daemon=True).start()
        finally:
            self._listener.close()
            if self.unix_path is not None:
                self.unix_path.unlink(missing_ok=True)

    def _too_many(self) -> str:
        return (
            f"ipybox sandbox proxy: too many connections (at most {self._limits.max_connections} at "
            "once from this kernel); close idle ones"
        )

    def _handle_counted(self, client: socket.socket) -> None:
        try:
            self._handle(client)
        finally:
            self._slots.release()

    def _handle(self, client: socket.socket) -> None:
        with contextlib.ExitStack() as stack:
            stack.enter_context(client)
            try:
                head, rest = _read_head(client, time.monotonic() + self._limits.header_timeout)
                method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            except (OSError, ValueError):
                return
            connect = method.upper() == "CONNECT"
            host, port, path = _target(target, connect)
            if host is None:
                _refuse(client, 400, f"ipybox sandbox proxy: cannot parse the target {target!r}")
                return
            if not self._allowed.allows(host, port):
                _refuse(client, 403, f"ipybox sandbox: {host}:{port} is not in the policy's allow_hosts")
                return
            try:
                upstream = _connect(host, port)
            except PermissionError as exc:
                _refuse(client, 403, f"ipybox sandbox: {exc}")
                return
            except OSError as exc:
                _refuse(client, 502, f"ipybox sandbox proxy: cannot reach {host}:{port}: {exc}")
                return
            stack.enter_context(upstream)
            client.settimeout(None)
            if connect:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                first_line = f"{method} {path} {version}".encode("latin-1")
                upstream.sendall(first_line + _without_proxy_headers(head) + rest)
            _pipe(client, upstream)


def _read_head(client: socket.socket, deadline: float) -> tuple[bytes, bytes]:
    """The request head and the bytes after it; ``ValueError`` unless it is complete by ``deadline``
    (a ``time.monotonic()`` value: bytes trickling in do not extend it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ValueError("no complete request head in time")
        client.settimeout(left)
        chunk = client.recv(4096)
        if not chunk or len(data) > _HEAD_LIMIT:
            raise ValueError("incomplete request head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _target(target: str, connect: bool) -> tuple[str | None, int, str]:
    """``(host, port, origin-form path)`` of a CONNECT authority or an absolute ``http://`` URI."""
    default = 443
    if not connect:
        if not target.lower().startswith("http://"):
            return None, 0, ""
        target = target[len("http://") :]
        authority, slash, path = target.partition("/")
        target, default, path = authority, 80, slash + path or "/"
    else:
        path = ""
    if target.startswith("["):
        host, _, port_text = target[1:].partition("]")
        port_text = port_text.lstrip(":")
    else:
        host, _, port_text = target.partition(":")
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        return None, 0, ""
    return (host or None), port, path


def _connect(host: str, port: int) -> socket.socket:
    literal = _is_ip(host)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if not literal:
        for *_, address in infos:
            if reaches_host_itself(str(address[0])):
                raise PermissionError(
                    f"{host} resolves to the local address {address[0]} (allow the IP itself)"
                )
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(10)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.settimeout(None)
        return sock
    raise last or OSError(f"no address for {host}")


def reaches_host_itself(address: str) -> bool:
    """Whether a connection to the IP ``address`` stays on this machine or its link.

    Loopback, link-local, unspecified and ``0.0.0.0/8`` (Linux connects ``0.0.0.0`` to the host
    itself), also when written as an IPv4-mapped (``::ffff:127.0.0.1``) or IPv4-compatible
    (``::127.0.0.1``) IPv6 address: Python before 3.13 does not see through those. ``address`` is
    what ``getaddrinfo`` returned, so spellings such as ``127.1``, ``0x7f.1`` or ``2130706433`` arrive
    here already as ``127.0.0.1``.
    """
    ip = ipaddress.ip_address(address.partition("%")[0])
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        elif int(ip) >> 32 == 0:
            candidates.append(ipaddress.IPv4Address(int(ip)))
    return any(
        item.is_loopback
        or item.is_link_local
        or item.is_unspecified
        or (isinstance(item, ipaddress.IPv4Address) and item in _THIS_NETWORK)
        for item in candidates
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _without_proxy_headers(head: bytes) -> bytes:
    lines = head.split(b"\r\n")[1:]
    kept = [line for line in lines if not line.lower().startswith((b"proxy-", b"proxy_"))]
    return b"\r\n" + b"\r\n".join(kept)


def _refuse(client: socket.socket, status: int, message: str, *, timeout: float | None = None) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}[status]
    body = (message + "\n").encode()
    with contextlib.suppress(OSError):
        if timeout is not None:
            client.settimeout(timeout)
        client.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both directions are closed."""

    def copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join()
