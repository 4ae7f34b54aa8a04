"""An OAuth-protected Streamable HTTP MCP server, with its own authorization server, on loopback.

    python oauth_server.py      prints "PORTS <authorization server> <resource server> <open server>"

Two servers in one process, sharing one in-memory provider (the MCP SDK's server-side auth):

- the **authorization server** (``create_auth_routes``): metadata, dynamic registration, an
  authorization endpoint that approves at once (it redirects the browser straight back with a code,
  as after a user's consent), PKCE-checked token exchange, refresh;
- the **resource server** (``MCPServer`` with a token verifier): ``/mcp`` (Streamable HTTP) and
  ``/sse`` (SSE) need a bearer token with scope ``tools``; each serves protected resource metadata
  naming the authorization server.

Tools: ``whoami()`` (the client id the token belongs to), ``add(a, b)`` and, on the protected
server only, ``revoke_access_tokens()`` (the next request is then a 401). Every access token
starts with ``ACCESS_TOKEN_PREFIX`` so a test can look for it anywhere. The **open server** is the
same MCP server without authorization (a baseline for benchmarks/bench_oauth.py).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import sys
import time
import warnings

import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

ACCESS_TOKEN_PREFIX = "ipybox-test-access-"
SCOPE = "tools"


class ApprovingProvider:
    """An authorization server that approves every authorization request at once (no login page)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(24)
        refresh = "ipybox-test-refresh-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + 3600,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=3600,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh[refresh_token.token]
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, None)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The resource server's token verifier (the same process: no introspection needed)."""
        return await self.load_access_token(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: object
    ) -> OAuthToken:
        raise NotImplementedError("no SEP-990 identity assertions here")


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue until uvicorn serves
    return sock


def build(provider: ApprovingProvider, as_url: str, rs_url: str) -> tuple[Starlette, Starlette, Starlette]:
    """The authorization server's app, the resource server's app and the same without authorization."""
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE])
    authorization = Starlette(
        routes=create_auth_routes(
            provider, issuer_url=AnyHttpUrl(as_url), client_registration_options=registration
        )
    )
    mcp, over_sse = (_protected(provider, as_url, f"{rs_url}/{path}") for path in ("mcp", "sse"))
    unprotected = MCPServer("ipybox-oauth-demo")
    for server in (mcp, over_sse, unprotected):
        _add_tools(server)

    @mcp.tool()
    def revoke_access_tokens() -> int:
        """Revoke every access token (refresh tokens stay): the next request gets a 401."""
        revoked = len(provider.access)
        provider.access.clear()
        return revoked

    resource = mcp.streamable_http_app()
    resource.router.routes.extend(over_sse.sse_app().routes)  # the SSE transport at /sse, protected too
    return authorization, resource, unprotected.streamable_http_app()


def _protected(provider: ApprovingProvider, as_url: str, resource_url: str) -> MCPServer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MCPServer(
            "ipybox-oauth-demo",
            token_verifier=provider,
            auth=AuthSettings(
                issuer_url=str(AnyHttpUrl(as_url)),  # rendered as the metadata renders it
                resource_server_url=resource_url,
                required_scopes=[SCOPE],
                validate_token_resource=False,
            ),
        )


def _add_tools(mcp: MCPServer) -> None:
    @mcp.tool()
    def whoami() -> str:
        """The client the request's access token was issued to."""
        token = get_access_token()
        return token.client_id if token is not None else "nobody"

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b


async def serve() -> None:
    sockets = [_bound(), _bound(), _bound()]
    as_port, rs_port, open_port = (sock.getsockname()[1] for sock in sockets)
    apps = build(ApprovingProvider(), f"http://127.0.0.1:{as_port}", f"http://127.0.0.1:{rs_port}")
    servers = [uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")) for app in apps]
    print(f"PORTS {as_port} {rs_port} {open_port}", flush=True)
    await asyncio.gather(
        *(server.serve(sockets=[sock]) for server, sock in zip(servers, sockets, strict=True))
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(serve()))
