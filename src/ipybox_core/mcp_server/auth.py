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
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping

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
