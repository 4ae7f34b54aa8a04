"""Bearer-token authentication of ``ipybox mcp`` over Streamable HTTP.

Whoever can call ``execute_code`` runs code as the server's user (or in its sandbox), so the HTTP
endpoint is protected by a bearer token: every request must carry ``Authorization: Bearer <token>``.
A request without it, or with a wrong one, is answered ``401`` before it reaches the MCP
server: no MCP session is created and no kernel is started.

The policy (:func:`resolve_token`):

- the token comes from the environment variable ``IPYBOX_MCP_TOKEN`` when it is set (a fixed
  token for deployments), otherwise a fresh random one is generated at each start and printed;
- a token is required on every address; ``--no-auth`` turns it off, and only on a loopback
  address (``127.0.0.0/8``, ``::1``, ``localhost``). Off loopback the server refuses to start
  without a token.

Without a token, the only thing between a web page and the server is the browser's same-origin
policy, which DNS rebinding defeats (the attacker's name resolves to the loopback address). So every
``--no-auth`` server checks ``Host`` and ``Origin`` (:class:`HostCheck`), whatever the address.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ipybox_core.errors import ConfigError

TOKEN_ENV = "IPYBOX_MCP_TOKEN"
"""The environment variable that sets a fixed token (otherwise one is generated at start)."""
MIN_TOKEN_LENGTH = 16
_UNAUTHORIZED = (
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": '
    b'"Unauthorized: send the ipybox token as \\"Authorization: Bearer <token>\\""}}'
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``.

    Any other name counts as not loopback, whatever it resolves to.
    """
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, *, no_auth: bool = False, environ: Mapping[str, str]) -> tuple[str | None, bool]:
    """The token the server listening on ``host`` requires, and whether it was generated.

    Returns ``(None, False)`` only with ``no_auth`` on a loopback host.

    Raises:
        ConfigError: ``no_auth`` off loopback, or a fixed token that is too short or malformed.
    """
    if no_auth:
        if not is_loopback(host):
            raise ConfigError(
                f"--no-auth is allowed only on a loopback address (127.0.0.1, ::1, localhost), not on "
                f"{host!r}: anyone who reaches the server could run code; drop --no-auth and send the "
                "printed token"
            )
        return None, False
    fixed = environ.get(TOKEN_ENV)
    if fixed is None or fixed == "":
        return secrets.token_urlsafe(32), True
    if len(fixed) < MIN_TOKEN_LENGTH or not fixed.isascii() or not fixed.isprintable() or " " in fixed:
        raise ConfigError(
            f"{TOKEN_ENV} must be at least {MIN_TOKEN_LENGTH} printable ASCII characters without spaces "
            "(e.g. the output of `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    return fixed, False


class BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get ``401``.

    The comparison is constant-time. Lifespan events pass through.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(_UNAUTHORIZED)).encode()),
                    (b"www-authenticate", b'Bearer realm="ipybox"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": _UNAUTHORIZED})

    def _authorized(self, scope: Scope) -> bool:
        values = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = values[0].strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(credentials.strip(), self._expected)


@dataclass(frozen=True)
class AllowedHosts:
    """The ``Host`` and ``Origin`` values a server accepts: the address it is bound to with its port,
    and for a loopback address also ``localhost`` (see :func:`allowed_hosts`)."""

    hosts: frozenset[str]
    origins: frozenset[str]

    def transport_security(self) -> TransportSecuritySettings:
        """The same lists for the MCP SDK's own check."""
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=sorted(self.hosts),
            allowed_origins=sorted(self.origins),
        )


def allowed_hosts(address: str, port: int, *, scheme: str = "http") -> AllowedHosts:
    """What :class:`HostCheck` lets through for a server bound to ``address`` (an IP, as bound, or a
    name) on ``port``: ``address:port`` and, for loopback, ``localhost:port`` (also without the port
    when it is the scheme's default); origins are the same with ``scheme://``."""
    name = address.strip().strip("[]").lower()
    names = [f"[{name}]" if ":" in name else name]
    if is_loopback(name) and name != "localhost":
        names.append("localhost")
    default = {"http": 80, "https": 443}.get(scheme)
    hosts = [f"{n}:{port}" for n in names] + (names if port == default else [])
    return AllowedHosts(frozenset(hosts), frozenset(f"{scheme}://{host}" for host in hosts))


def _one_header(scope: Scope, name: bytes) -> tuple[int, str]:
    values: Sequence[bytes] = [value for key, value in scope.get("headers", ()) if key == name]
    return len(values), values[0].decode("latin-1").strip().lower() if values else ""


class HostCheck:
    """ASGI middleware against DNS rebinding: a request whose ``Host`` is not one of the allowed
    ones gets ``421``, one with an ``Origin`` that is not allowed gets ``403``, before anything else
    sees it. A request without ``Origin`` (not from a browser) passes. Nothing is logged.
    """

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self._allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        count, host = _one_header(scope, b"host")
        if count != 1 or host not in self._allowed.hosts:
            await _refuse(scope, send, 421, b"Misdirected request: the Host header names another server")
            return
        count, origin = _one_header(scope, b"origin")
        if count > 1 or (count == 1 and origin not in self._allowed.origins):
            await _refuse(scope, send, 403, b"Forbidden: requests from this Origin are not allowed")
            return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Send, status: int, message: bytes) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(message)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": message})
