"""OAuth 2.1 for HTTP MCP servers, on the MCP SDK's own client (``mcp.client.auth``).

The SDK does the protocol: protected resource and authorization server metadata discovery,
dynamic registration or a client ID metadata document, PKCE, resource indicators, issuer checks,
scope selection and step-up, refresh, and the client-credentials grant (secret or
``private_key_jwt``). ipybox adds the three things an application decides:

- **the authorization step**: with ``grant="authorization_code"`` a user must open a URL. ipybox
  hands the application an :class:`AuthorizationRequest` (the server's name, the URL, the redirect
  URI) through its ``authorize`` callback, which answers with the URL the browser was sent back to
  (``redirect_uri?code=...&state=...``). ``ipybox run`` prints and opens the URL and listens on the
  loopback redirect URI (:func:`ipybox_core.mcp.oauth_loopback.browser_authorize`).
- **where tokens live**: a :class:`~ipybox_core.mcp.oauth_store.TokenStore` on the host (default: a
  ``0600`` file under the user's state directory); never the kernel or its environment.
- **errors**: a 401 or a failed authorization is one line naming the server and the fix
  (:class:`~ipybox_core.errors.McpAuthorizationError`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.exceptions import MCPDeprecationWarning

from ipybox_core.mcp.oauth_config import OAuthConfig
from ipybox_core.mcp.oauth_store import TokenStore

AUTHORIZATION_TIMEOUT = 900.0
"""Seconds the application's ``authorize`` callback may take (a user at a browser)."""


@dataclass(frozen=True)
class AuthorizationRequest:
    """An MCP server needs a user to authorize this application: open ``url`` in a browser.

    The authorization server then sends the browser to ``redirect_uri`` with ``code`` and
    ``state``; answer with that whole URL.
    """

    server: str
    """The server's name in the registry (its key in ``mcpServers``)."""
    url: str
    """The authorization URL (PKCE challenge, state, scopes and resource included)."""
    redirect_uri: str
    """Where the browser comes back to; the answer is this URL with its query."""
    conversation: str | None = None
    """The conversation whose user must authorize (``Sessions``, a server with ``"account":
    "conversation"``): show the URL to that user only. ``None``: the application's own account."""


Authorize = Callable[[AuthorizationRequest], Awaitable[str]]
"""The application's answer to an :class:`AuthorizationRequest`: the URL the browser came back to."""


class AuthorizationDenied(OAuthFlowError):
    """The authorization server sent the browser back with an error (the user declined, ...)."""


class AuthorizationDeclined(AuthorizationDenied):
    """The user declined (or dismissed) the authorization where the application asked (its message:
    the answer, and why when ipybox answered for the user)."""


class NoAuthorizer(OAuthFlowError):
    """A user must authorize, and the application has no ``authorize`` callback."""


def parse_callback(url: str) -> AuthorizationCodeResult:
    """The code, state and issuer of the URL the browser came back to.

    Raises:
        AuthorizationDenied: the URL carries an OAuth ``error`` (or no ``code``).
    """
    query = parse_qs(urlsplit(url).query)
    first: dict[str, str] = {name: values[0] for name, values in query.items() if values}
    if "error" in first:
        description = first.get("error_description")
        raise AuthorizationDenied(first["error"] + (f" ({description})" if description else ""))
    if "code" not in first:
        raise AuthorizationDenied(f"the redirect carries no code: {url.split('?', 1)[0]}?...")
    return AuthorizationCodeResult(code=first["code"], state=first.get("state"), iss=first.get("iss"))


def store_key(server_url: str, config: OAuthConfig) -> str:
    """The token store key of a server's authorization: its URL, grant and client."""
    client = config.client_id or config.client_metadata_url or "registered"
    where = f" {config.redirect_uri}" if config.grant == "authorization_code" else ""
    return f"{server_url} {config.grant} {client}{where}"


class _StoreStorage:
    """The SDK's per-provider ``TokenStorage`` over one key of an ipybox :class:`TokenStore`."""

    def __init__(self, store: TokenStore, key: str, fixed_client: OAuthClientInformationFull | None) -> None:
        self.store = store
        self.key = key
        self.fixed_client = fixed_client
        self.expires_at: float | None = None
        self.context: Any = None
        """The provider's SDK context: what it discovered is kept with the tokens, for a refresh later."""
        self.discovered: dict[str, Any] = {}

    async def _record(self) -> dict[str, Any]:
        return await self.store.load(self.key) or {}

    async def get_tokens(self) -> OAuthToken | None:
        record = await self._record()
        tokens = record.get("tokens")
        if not isinstance(tokens, dict):
            return None
        expires_at = record.get("expires_at")
        self.expires_at = float(expires_at) if isinstance(expires_at, int | float) else None
        discovered = record.get("discovered")
        self.discovered = discovered if isinstance(discovered, dict) else {}
        return OAuthToken.model_validate(tokens)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = await self._record()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in else None
        record["discovered"] = self._discovered()
        await self.store.save(self.key, record)

    def _discovered(self) -> dict[str, Any]:
        context = self.context
        if context is None:
            return {}
        found: dict[str, Any] = {"auth_server_url": context.auth_server_url}
        for name in ("oauth_metadata", "protected_resource_metadata"):
            metadata = getattr(context, name)
            found[name] = (
                metadata.model_dump(mode="json", exclude_none=True) if metadata is not None else None
            )
        return found

    def restore(self, context: Any) -> None:
        """Put what an earlier run discovered back into a fresh SDK context (so a refresh finds the
        token endpoint; every 401 discovers afresh anyway)."""
        found = self.discovered
        if context.oauth_metadata is None and isinstance(found.get("oauth_metadata"), dict):
            context.oauth_metadata = OAuthMetadata.model_validate(found["oauth_metadata"])
        if context.protected_resource_metadata is None and isinstance(
            found.get("protected_resource_metadata"), dict
        ):
            context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                found["protected_resource_metadata"]
            )
        if context.auth_server_url is None and isinstance(found.get("auth_server_url"), str):
            context.auth_server_url = found["auth_server_url"]

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        info = (await self._record()).get("client_info")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.fixed_client is not None:
            return
        record = await self._record()
        record["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        await self.store.save(self.key, record)


class AuthState:
    """What one server's authorization went through (for the one-line error), shared by its connections."""

    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.rejected: tuple[int, str] | None = None
        """The MCP endpoint's last 401/403: the status and what its ``WWW-Authenticate`` says."""
        self.waiting_since: float | None = None
        self.waited = 0.0
        """Seconds spent waiting for a user to authorize (not counted against the connect timeout)."""

    def reset(self) -> None:
        self.failure = None
        self.rejected = None

    async def on_response(self, response: httpx2.Response) -> None:
        """An httpx response hook for the MCP endpoint's requests: remembers a 401 or 403."""
        if response.status_code in (401, 403):
            error = extract_field_from_www_auth(response, "error")
            description = extract_field_from_www_auth(response, "error_description")
            said = ": ".join(part for part in (error, description) if part)
            self.rejected = (response.status_code, said)
        elif response.is_success:
            self.rejected = None

    def user_wait(self) -> float:
        """Seconds spent waiting for the user so far (including a wait in progress)."""
        ongoing = time.monotonic() - self.waiting_since if self.waiting_since is not None else 0.0
        return self.waited + ongoing


class _Flow:
    """Mixin for the SDK's providers: adds configured scopes, remembers what failed, and restores what
    an earlier run knew (token expiry, discovered metadata) so a stored token can be refreshed."""

    state: AuthState
    storage_adapter: _StoreStorage
    context: Any
    configured_scopes: str | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        # The SDK requests the scopes the server asks for; configured ones are added to those.
        metadata = self.context.client_metadata
        metadata.scope = union_scopes(metadata.scope, self.configured_scopes)
        return await super()._perform_authorization()  # type: ignore[misc,no-any-return]

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        adapter = self.storage_adapter
        if adapter.expires_at is not None:  # the SDK knows expiry only for tokens it got itself
            self.context.token_expiry_time = adapter.expires_at
        adapter.restore(self.context)

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super()._auth_flow(request)  # type: ignore[misc]
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as exc:
            self.state.failure = exc
            raise
        finally:
            await flow.aclose()


class _AuthorizationCodeFlow(_Flow, OAuthClientProvider):
    pass


class _ClientSecretFlow(_Flow, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyFlow(_Flow, PrivateKeyJWTOAuthProvider):
    pass


def build_provider(
    server: str,
    server_url: str,
    config: OAuthConfig,
    *,
    store: TokenStore,
    authorize: Authorize | None,
    state: AuthState,
) -> httpx2.Auth:
    """The SDK's OAuth provider for one server, with ipybox's store, authorization callback and records."""
    scope = " ".join(config.scopes) if config.scopes else None
    key = store_key(server_url, config)
    provider: _Flow
    with warnings.catch_warnings():  # issuer omitted: the SDK warns that it will be required in 3.0
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if config.grant == "client_credentials":
            assert config.client_id is not None
            adapter = _StoreStorage(store, key, None)
            if config.private_key is not None:
                assertion = SignedJWTParameters(
                    issuer=config.client_id,
                    subject=config.client_id,
                    signing_key=config.private_key,
                    signing_algorithm=config.signing_algorithm,
                ).create_assertion_provider()
                provider = _PrivateKeyFlow(
                    server_url, adapter, config.client_id, assertion, scope=scope, issuer=config.issuer
                )
            else:
                assert config.client_secret is not None
                method = config.auth_method
                provider = _ClientSecretFlow(
                    server_url,
                    adapter,
                    config.client_id,
                    config.client_secret,
                    token_endpoint_auth_method="client_secret_post"
                    if method == "client_secret_post"
                    else "client_secret_basic",
                    scope=scope,
                    issuer=config.issuer,
                )
        else:
            provider = _authorization_code_provider(server, server_url, config, key, store, authorize, state)
            adapter = provider.storage_adapter
    provider.state = state
    provider.storage_adapter = adapter
    adapter.context = provider.context
    provider.configured_scopes = scope
    assert isinstance(provider, httpx2.Auth)
    return provider


def _authorization_code_provider(
    server: str,
    server_url: str,
    config: OAuthConfig,
    key: str,
    store: TokenStore,
    authorize: Authorize | None,
    state: AuthState,
) -> _AuthorizationCodeFlow:
    fixed = None
    if config.client_id is not None:
        fixed = OAuthClientInformationFull(
            client_id=config.client_id,
            client_secret=config.client_secret,
            redirect_uris=[config.redirect_uri],
            token_endpoint_auth_method=config.auth_method,
        )
    adapter = _StoreStorage(store, key, fixed)
    pending: list[AuthorizationCodeResult] = []

    async def redirect_handler(url: str) -> None:
        if authorize is None:
            raise NoAuthorizer(
                "a user must authorize in a browser, and the application has no authorize callback"
            )
        request = AuthorizationRequest(server=server, url=url, redirect_uri=config.redirect_uri)
        state.waiting_since = time.monotonic()
        try:
            answer = await asyncio.wait_for(authorize(request), AUTHORIZATION_TIMEOUT)
        except TimeoutError:
            raise AuthorizationDenied(f"not completed within {AUTHORIZATION_TIMEOUT:g} s") from None
        finally:
            state.waited += time.monotonic() - state.waiting_since
            state.waiting_since = None
        pending.append(parse_callback(answer))

    async def callback_handler() -> AuthorizationCodeResult:
        return pending.pop()

    metadata = OAuthClientMetadata(
        redirect_uris=[config.redirect_uri],
        client_name=config.client_name,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=config.auth_method if config.client_id is not None else None,
    )
    provider = _AuthorizationCodeFlow(
        server_url,
        metadata,
        adapter,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=config.client_metadata_url,
    )
    provider.storage_adapter = adapter
    return provider


def failure_line(
    server: str, config: OAuthConfig | None, state: AuthState, *, static_header: bool
) -> str | None:
    """The one line for a connection or call that failed on authorization; ``None``: it did not."""
    label = f"MCP server {server!r}"
    failure = state.failure
    if failure is not None:
        return f"{label}: OAuth authorization failed: {_reason(failure)}; {_fix(failure, config)}"
    if state.rejected is None:
        return None
    status, said = state.rejected
    what = f"HTTP {status}" + (f": {said}" if said else "")
    if config is None and static_header:
        return (
            f"{label} rejected the Authorization header of its config ({what}): replace the expired or "
            'wrong token, or let ipybox authorize: "auth": "oauth" in its mcpServers entry'
        )
    if config is None:
        return (
            f'{label} requires authorization ({what}): add "auth": "oauth" to its mcpServers entry '
            '(OAuth 2.1), or an "Authorization" header in its "headers"'
        )
    if status == 403:
        return (
            f"{label} refused the authorized token ({what}): the account or client lacks the permission; "
            'add the scope the server names to "scopes" in its "auth" config, or ask its administrator'
        )
    return (
        f'{label} rejected the OAuth token it was given ({what}): check the client in its "auth" config '
        "(client_id, client_secret, grant) with the server's administrator"
    )


def _reason(failure: BaseException) -> str:
    if isinstance(failure, AuthorizationDeclined):
        return f"the user did not authorize it ({failure})"
    if isinstance(failure, AuthorizationDenied):
        return f"the authorization server refused it: {failure}"
    text = str(failure).strip() or type(failure).__name__
    return text.splitlines()[0][:300]


def _fix(failure: BaseException, config: OAuthConfig | None) -> str:
    if isinstance(failure, NoAuthorizer):
        return (
            "pass authorize= (a callback that opens the URL and returns the redirect) to McpRegistry or "
            'CodeExecutor, run it with `ipybox run`, or use "grant": "client_credentials"'
        )
    if isinstance(failure, OAuthRegistrationError):
        return (
            'the server does not register clients dynamically: set "client_id" (and "client_secret") '
            'in its "auth" config'
        )
    if isinstance(failure, AuthorizationDenied):
        return "authorize again (the next call asks again)"
    if isinstance(failure, OAuthTokenError) and config is not None and config.client_id is not None:
        return 'check "client_id", "client_secret" and "token_endpoint_auth_method" in its "auth" config'
    return 'check its "auth" config and the server\'s authorization metadata'


class _DropFlowTracebacks(logging.Filter):
    """The SDK logs a traceback for every failed OAuth flow; the connection reports it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_DropFlowTracebacks())
