"""Network: none by default; ``allow_hosts`` opens HTTP(S) to the listed hosts through a filtering proxy."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from sandbox_kit import require_bwrap, start_sandboxed

from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.sandbox import BwrapLauncher, SandboxPolicy

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.sandbox]


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from the host: {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve() -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[int, int]]:
    """Two host HTTP servers on loopback: the first is allowed, the second is not."""
    require_bwrap()
    allowed, other = _serve(), _serve()
    try:
        yield allowed.server_address[1], other.server_address[1]
    finally:
        allowed.shutdown()
        other.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(servers: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Kernel]:
    allowed, _ = servers
    policy = SandboxPolicy(allow_hosts=(f"127.0.0.1:{allowed}", f"localhost:{allowed}"))
    kernel = await start_sandboxed(policy, tmp_path_factory.mktemp("net"))
    try:
        yield kernel
    finally:
        await kernel.shutdown(now=True)


FETCH = (
    "import urllib.request, urllib.error\n"
    "def fetch(url):\n"
    "    try:\n"
    "        return urllib.request.urlopen(url, timeout=10).read().decode()\n"
    "    except urllib.error.HTTPError as exc:\n"
    "        return f'HTTP {exc.code}: {exc.read().decode().strip()}'\n"
    "    except OSError as exc:\n"
    "        return f'{type(exc).__name__}: {exc}'\n"
)


async def fetch(kernel: Kernel, url: str) -> str:
    output = await kernel.run(FETCH + f"print(fetch({url!r}))")
    assert output.error is None, output.error
    return output.text.strip()


async def test_allowed_host_is_reached_through_the_proxy(kernel: Kernel, servers: tuple[int, int]) -> None:
    assert await fetch(kernel, f"http://127.0.0.1:{servers[0]}/ok") == "hello from the host: /ok"


async def test_other_hosts_and_ports_are_refused(kernel: Kernel, servers: tuple[int, int]) -> None:
    text = await fetch(kernel, f"http://127.0.0.1:{servers[1]}/")
    assert text.startswith("HTTP 403") and "allow_hosts" in text
    assert (await fetch(kernel, "http://example.com/")).startswith("HTTP 403")


async def test_allowed_name_resolving_to_loopback_is_refused(
    kernel: Kernel, servers: tuple[int, int]
) -> None:
    text = await fetch(kernel, f"http://localhost:{servers[0]}/")
    assert text.startswith("HTTP 403") and "local address" in text


async def test_https_style_connect_tunnel(kernel: Kernel, servers: tuple[int, int]) -> None:
    port = servers[0]
    output = await kernel.run(
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
        f"s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "established = s.recv(100)\n"
        "s.sendall(b'GET /tunnel HTTP/1.0\\r\\n\\r\\n')\n"
        "reply = b''\n"
        "while chunk := s.recv(4096):\n"
        "    reply += chunk\n"
        "print(established.split(b'\\r\\n')[0].decode(), '|', reply.split(b'\\r\\n\\r\\n')[-1].decode())"
    )
    assert output.text.strip() == "HTTP/1.1 200 Connection established | hello from the host: /tunnel"


async def test_direct_connections_still_have_no_network(kernel: Kernel, servers: tuple[int, int]) -> None:
    output = await kernel.run(
        "import socket\n"
        "results = []\n"
        f"for target in [('127.0.0.1', {servers[0]}), ('1.1.1.1', 443)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=3)\n"
        "        results.append('connected')\n"
        "    except OSError as exc:\n"
        "        results.append(type(exc).__name__)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80)\n"
        "    results.append('resolved')\n"
        "except OSError as exc:\n"
        "    results.append(type(exc).__name__)\n"
        "print(*results)"
    )
    assert output.text.split() == ["ConnectionRefusedError", "OSError", "gaierror"]


async def test_the_proxy_socket_cannot_be_replaced(kernel: Kernel) -> None:
    output = await kernel.run(
        "import os\ntry:\n    os.unlink('/tmp/.ipybox-proxy.sock')\n    print('removed')\n"
        "except OSError as exc:\n    print(type(exc).__name__)"
    )
    # EBUSY (a mount point), or EACCES first for an unprivileged kernel (its /tmp root is not its own)
    assert output.text.strip() in {"OSError", "PermissionError"}


async def test_the_proxy_stops_with_its_kernel(servers: tuple[int, int], tmp_path: Path) -> None:
    launcher = BwrapLauncher(SandboxPolicy(allow_hosts=(f"127.0.0.1:{servers[0]}",)), workspace=tmp_path)
    kernel = await Kernel.start(KernelConfig(cwd=tmp_path, launcher=launcher))
    (proxy,) = launcher._proxies.values()
    assert proxy.running and proxy.unix_path is not None and proxy.unix_path.exists()
    await kernel.shutdown(now=True)  # removes the runtime directory
    for _ in range(50):
        if not proxy.running:
            break
        await asyncio.sleep(0.1)
    assert not proxy.running and not proxy.unix_path.exists()
    launcher.close()
