"""The ``"auth"`` key of an HTTP or SSE server's config: OAuth 2.1, as the MCP authorization spec says.

```json
{"url": "https://mcp.example.com/mcp", "auth": "oauth"}
{"url": "https://mcp.example.com/mcp",
 "auth": {"type": "oauth", "client_id": "my-app", "client_secret": "${SECRET}", "scopes": ["read"]}}
{"url": "https://mcp.example.com/mcp",
 "auth": {"type": "oauth", "grant": "client_credentials", "client_id": "svc", "client_secret": "${SECRET}"}}
```

This module is only the validated settings (no MCP SDK import); :mod:`ipybox_core.mcp.oauth` runs the
flow on the MCP SDK's own OAuth client.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Grant = Literal["authorization_code", "client_credentials"]
Account = Literal["application", "conversation"]
TokenEndpointAuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"
"""Where the authorization server sends the browser back (``ipybox run`` listens there)."""


class OAuthConfig(BaseModel):
    """OAuth 2.1 for one HTTP MCP server: discovery, registration, PKCE, refresh and step-up are the SDK's.

    Without ``client_id`` the client registers itself dynamically (RFC 7591), or uses
    ``client_metadata_url`` as its id where the authorization server supports client ID metadata
    documents. ``grant="client_credentials"`` is machine-to-machine: no user, no browser; it needs
    ``client_id`` and ``client_secret`` (or ``private_key`` for ``private_key_jwt``).

    ``account="conversation"`` makes each conversation of a :class:`~ipybox_core.sessions.Sessions`
    authorize its own user's account (its own tokens, its own authorization step); the default,
    ``"application"``, is one account for the whole application.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["oauth"] = "oauth"
    grant: Grant = "authorization_code"
    """``"authorization_code"`` (a user authorizes in a browser, with PKCE) or ``"client_credentials"``."""
    client_id: str | None = Field(default=None, min_length=1)
    """A pre-registered client; ``None``: dynamic registration (or ``client_metadata_url``)."""
    client_secret: str | None = Field(default=None, min_length=1, repr=False)
    private_key: str | None = Field(default=None, min_length=1, repr=False)
    """A PEM private key: the client authenticates with a signed JWT (``private_key_jwt``)."""
    signing_algorithm: str = "RS256"
    """The JWT algorithm for ``private_key`` (``RS256``, ``ES256``, ...)."""
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    """How a pre-registered client authenticates; default: ``client_secret_basic`` with a secret,
    ``private_key_jwt`` with a key, else ``none``."""
    scopes: list[str] | None = None
    """Scopes to ask for besides those the server asks for (``None``: only the server's)."""
    client_metadata_url: str | None = Field(default=None, pattern=r"^https://[^/]+/.+")
    """An HTTPS URL of this client's metadata document, used as its id where supported."""
    redirect_uri: str = Field(default=DEFAULT_REDIRECT_URI, pattern=r"^https?://")
    client_name: str = "ipybox"
    """The name a dynamically registered client gets (users see it on the consent page)."""
    issuer: str | None = Field(default=None, pattern=r"^https?://")
    """The authorization server the credentials of a ``client_credentials`` client belong to: they
    are then only ever sent there (default: the one the MCP server names)."""
    account: Account = "application"
    """Whose account the tokens are: the application's (one authorization for everything), or, in
    ``Sessions``, each conversation's (``"conversation"``: every conversation authorizes its own user
    and uses only its own tokens)."""

    @model_validator(mode="after")
    def _consistent(self) -> OAuthConfig:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("client_secret needs client_id (a pre-registered client)")
        if self.private_key is not None and self.grant != "client_credentials":
            raise ValueError('private_key is for grant "client_credentials" (private_key_jwt)')
        if self.grant == "client_credentials":
            if self.client_id is None:
                raise ValueError('grant "client_credentials" needs client_id')
            if (self.client_secret is None) == (self.private_key is None):
                raise ValueError(
                    'grant "client_credentials" needs client_secret or private_key (one of them)'
                )
            if self.client_metadata_url is not None:
                raise ValueError('client_metadata_url is for grant "authorization_code"')
            if self.account == "conversation":
                raise ValueError(
                    'account "conversation" is for grant "authorization_code" (a user per conversation); '
                    "client credentials are the application's own"
                )
        method = self.token_endpoint_auth_method
        if method in ("client_secret_basic", "client_secret_post") and self.client_secret is None:
            raise ValueError(f"token_endpoint_auth_method {method!r} needs client_secret")
        if method == "private_key_jwt" and self.private_key is None:
            raise ValueError("token_endpoint_auth_method 'private_key_jwt' needs private_key")
        return self

    @property
    def auth_method(self) -> TokenEndpointAuthMethod:
        """The token endpoint authentication of a pre-registered client."""
        if self.token_endpoint_auth_method is not None:
            return self.token_endpoint_auth_method
        if self.private_key is not None:
            return "private_key_jwt"
        return "client_secret_basic" if self.client_secret is not None else "none"
