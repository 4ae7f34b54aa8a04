"""An OAuth-protected Streamable HTTP MCP server whose authorization server knows several users.

    python oauth_users_server.py    prints "PORTS <authorization server> <resource server>"

As ``oauth_server.py`` (the MCP SDK's server-side auth, an authorization endpoint that approves at
once), except that the authorization endpoint signs in whoever the browser is logged in as: the
``user`` cookie of its request (a real browser's login session at the authorization server). Each
code and token belongs to that user. The resource server's tool ``me()`` answers with the user of
the request's token, and every call's user is recorded: ``GET /seen`` (no token needed) lists them
in order, so a test can check whose token each call carried without asking the client.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from pathlib import Path

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, AuthorizationCode, AuthorizationParams, RefreshToken
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: tests/ importable

from servers.oauth_server import SCOPE, ApprovingProvider, _bound, _protected

_browser_user: contextvars.ContextVar[str] = contextvars.ContextVar("browser_user", default="anonymous")


class UsersProvider(ApprovingProvider):
    """Codes and tokens belong to the user the browser was signed in as."""

    def __init__(self) -> None:
        super().__init__()
        self.user_of: dict[str, str] = {}  # code, access or refresh token -> user

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        redirect = await super().authorize(client, params)
        code = next(code for code in self.codes if code not in self.user_of)
        self.user_of[code] = _browser_user.get()
        return redirect

    def _owned(self, tokens: OAuthToken, user: str) -> OAuthToken:
        self.user_of[tokens.access_token] = user
        if tokens.refresh_token is not None:
            self.user_of[tokens.refresh_token] = user
        return tokens

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        user = self.user_of[authorization_code.code]
        return self._owned(await super().exchange_authorization_code(client, authorization_code), user)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        user = self.user_of[refresh_token.token]
        return self._owned(await super().exchange_refresh_token(client, refresh_token, scopes), user)


class SignedIn:
    """ASGI middleware: the ``user`` cookie of a request to the authorization server is who signed in."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            cookies = Request(scope).cookies
            _browser_user.set(cookies.get("user", "anonymous"))
        await self.app(scope, receive, send)


def build(provider: UsersProvider, as_url: str, rs_url: str) -> tuple[ASGIApp, Starlette]:
    """The authorization server's app and the resource server's."""
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE])
    authorization = Starlette(
        routes=create_auth_routes(
            provider, issuer_url=AnyHttpUrl(as_url), client_registration_options=registration
        )
    )
    mcp = _protected(provider, as_url, f"{rs_url}/mcp")
    seen: list[str] = []

    @mcp.tool()
    def me() -> str:
        """The user the request's access token belongs to."""
        token: AccessToken | None = get_access_token()
        user = provider.user_of.get(token.token, "unknown") if token is not None else "nobody"
        seen.append(user)
        return user

    async def seen_route(request: Request) -> JSONResponse:
        return JSONResponse(seen)

    resource = mcp.streamable_http_app()
    resource.router.routes.append(Route("/seen", seen_route))
    return SignedIn(authorization), resource


async def serve() -> None:
    sockets = [_bound(), _bound()]
    as_port, rs_port = (sock.getsockname()[1] for sock in sockets)
    apps = build(UsersProvider(), f"http://127.0.0.1:{as_port}", f"http://127.0.0.1:{rs_port}")
    servers = [uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")) for app in apps]
    print(f"PORTS {as_port} {rs_port}", flush=True)
    await asyncio.gather(
        *(server.serve(sockets=[sock]) for server, sock in zip(servers, sockets, strict=True))
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(serve()))
