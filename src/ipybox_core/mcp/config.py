"""MCP server configurations: stdio, Streamable HTTP and SSE, and ``{"mcpServers": ...}`` files.

A config is given as a dict in the format of Claude Desktop / Claude Code / Cursor
(``{"command": ..., "args": [...], "env": {...}}`` or ``{"url": ..., "headers": {...}}``) or as one
of the models below. ``${VAR}`` and ``${VAR:-default}`` placeholders in ``command``, ``args``,
``env``, ``cwd``, ``url``, ``headers`` and ``auth`` are filled from the host environment when the config is
parsed; the values then live only in the application process (a stdio server gets them in its
environment, an HTTP server in its request headers), never in the kernel.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ipybox_core.errors import ConfigError
from ipybox_core.mcp._placeholders import PlaceholderFiller
from ipybox_core.mcp.oauth_config import OAuthConfig

Protocol = Literal["fallback", "legacy", "auto"]

DEFAULT_MAX_RESULT_BYTES = 32 * 1024 * 1024
"""The largest message (a tool result, as JSON) an MCP server may send, on every transport."""


class McpServerConfig(BaseModel):
    """Settings every MCP server config has (base class of the three transport configs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: str
    """``"stdio"``, ``"http"`` (Streamable HTTP) or ``"sse"``."""
    connect_timeout: float | None = Field(default=None, gt=0)
    """Seconds to connect and list tools; ``None``: the registry's default."""
    call_timeout: float | None = Field(default=None, gt=0)
    """Seconds one tool call may take; ``None``: the registry's default."""
    max_result_bytes: int = Field(default=DEFAULT_MAX_RESULT_BYTES, gt=0)
    """The largest message (a tool result, as JSON) the server may send; a larger result fails the
    call with a :class:`~ipybox_core.errors.ToolError` naming this setting (the connection stays)."""
    protocol: Protocol = "fallback"
    """``"fallback"``: the ``initialize`` handshake, and the 2026-07-28 ``server/discover`` when the
    server refuses ``initialize`` (a 2026-07-28-only server; a stdio server is started again).
    ``"legacy"``: ``initialize`` only. ``"auto"``: probe ``server/discover`` first (a server that
    ignores the probe costs 10 s)."""

    _template: tuple[str, ...] | None = PrivateAttr(default=None)
    """The config's command line or URL before placeholders were filled (for :meth:`describe`)."""

    def describe(self) -> str:
        """A short description for messages and logs: placeholders unfilled, no env, headers or query."""
        raise NotImplementedError


class StdioServerConfig(McpServerConfig):
    """A server launched as a subprocess, speaking MCP over its stdin/stdout.

    The process gets a minimal environment (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``,
    ``USER``) plus ``env``; never the whole host environment. Its ``PATH`` has no relative entries
    and no directory a sandbox can write (unless ``env`` sets ``PATH``).
    """

    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    """The server's working directory. Default: ``/``, never ipybox's own working directory (which
    may be a sandbox's workspace: ``python -m``, ``npx`` and ``uvx`` look for code and config there).
    Relative paths in ``command`` and ``args`` are relative to it. A ``cwd`` set here is the
    operator's choice and is used as given, even inside a sandbox's workspace."""

    def describe(self) -> str:
        return " ".join(self._template or (self.command, *self.args))


class _UrlServerConfig(McpServerConfig):
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    auth: OAuthConfig | None = Field(default=None, repr=False)
    """OAuth 2.1 (``"oauth"`` or an :class:`~ipybox_core.mcp.oauth_config.OAuthConfig` dict); ``None``:
    no authorization, or a static ``Authorization`` header in ``headers``."""

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_shorthand(cls, value: Any) -> Any:
        return {"type": "oauth"} if value == "oauth" else value

    def describe(self) -> str:
        parts = urlsplit(self._template[0] if self._template else self.url)
        host = parts.netloc.rsplit("@", 1)[-1]  # without user:password
        return f"{parts.scheme}://{host}{parts.path}"


class HttpServerConfig(_UrlServerConfig):
    """A remote server over Streamable HTTP."""

    transport: Literal["http"] = "http"


class SseServerConfig(_UrlServerConfig):
    """A remote server over the legacy HTTP+SSE transport."""

    transport: Literal["sse"] = "sse"


_TRANSPORT_NAMES: dict[str, type[McpServerConfig]] = {
    "stdio": StdioServerConfig,
    "http": HttpServerConfig,
    "streamable-http": HttpServerConfig,
    "streamable_http": HttpServerConfig,
    "streamablehttp": HttpServerConfig,
    "sse": SseServerConfig,
}

IGNORED_KEYS = frozenset({"disabled", "autoApprove", "alwaysAllow", "disabledTools", "description"})
"""Keys other MCP clients keep in their config files; accepted and ignored."""


def parse_server_config(
    name: str | None,
    config: Mapping[str, Any] | McpServerConfig,
    *,
    environ: Mapping[str, str] | None = None,
) -> McpServerConfig:
    """Validate one server config and fill its ``${VAR}`` placeholders from ``environ``.

    The transport comes from ``"transport"`` or ``"type"`` (``stdio``, ``http``,
    ``streamable-http``, ``sse``) if given, else from the keys: ``command`` means stdio, ``url``
    means Streamable HTTP, or SSE when its path ends in ``/sse``.

    Raises:
        ConfigError: the config is malformed or a placeholder's variable is not set (the message
            names the server, the variable and the field).
    """
    label = f"MCP server {name!r}" if name else "MCP server config"
    if isinstance(config, McpServerConfig):
        raw: dict[str, Any] = config.model_dump(exclude_defaults=True) | {"transport": config.transport}
    elif isinstance(config, Mapping):
        raw = dict(config)
    else:
        raise ConfigError(f"{label}: expected a dict or an McpServerConfig, got {type(config).__name__}")
    model_type = _model_type(label, raw)
    if model_type is StdioServerConfig and "auth" in raw:
        raise ConfigError(
            f"{label}: 'auth' (OAuth) is for HTTP and SSE servers; a stdio server gets its credentials "
            "in its 'env'"
        )
    filler = PlaceholderFiller(os.environ if environ is None else environ)
    fields = {
        key: filler.fill(value, key) if key in _FILLED_FIELDS else value
        for key, value in raw.items()
        if key not in IGNORED_KEYS and key not in ("type", "transport")
    }
    if filler.missing:
        where = ", ".join(f"${{{var}}} in {field}" for var, field in filler.missing)
        names = sorted({var for var, _ in filler.missing})
        raise ConfigError(
            f"{label}: environment variable{'s' if len(names) > 1 else ''} {', '.join(names)} not set "
            f"({where}); set {'them' if len(names) > 1 else 'it'} or write ${{VAR:-default}}"
        )
    try:
        parsed = model_type.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(config)'}: "
            f"{error['msg'].removeprefix('Value error, ')}"
            for error in exc.errors()
        )
        raise ConfigError(f"{label}: invalid {_kind(model_type)} config: {problems}") from None
    template = [raw["url"]] if "url" in raw else [raw.get("command"), *(raw.get("args") or [])]
    parsed._template = tuple(str(part) for part in template)
    return parsed


_FILLED_FIELDS = frozenset({"command", "args", "env", "cwd", "url", "headers", "auth"})


def _model_type(label: str, raw: Mapping[str, Any]) -> type[McpServerConfig]:
    declared = raw.get("transport", raw.get("type"))
    if "transport" in raw and "type" in raw and raw["transport"] != raw["type"]:
        raise ConfigError(
            f"{label}: 'transport' ({raw['transport']!r}) and 'type' ({raw['type']!r}) disagree"
        )
    if declared is not None:
        model_type = _TRANSPORT_NAMES.get(str(declared).lower())
        if model_type is None:
            raise ConfigError(
                f"{label}: unknown transport {declared!r}; use 'stdio', 'http' (Streamable HTTP) or 'sse'"
            )
        return model_type
    if "command" in raw and "url" in raw:
        raise ConfigError(f"{label}: has both 'command' (stdio) and 'url' (HTTP); give one of them")
    if "command" in raw:
        return StdioServerConfig
    if "url" in raw:
        path = urlsplit(str(raw["url"])).path.rstrip("/")
        return SseServerConfig if path.endswith("/sse") else HttpServerConfig
    raise ConfigError(f"{label}: needs 'command' (a stdio server) or 'url' (an HTTP or SSE server)")


def _kind(model_type: type[McpServerConfig]) -> str:
    return {StdioServerConfig: "stdio", HttpServerConfig: "Streamable HTTP", SseServerConfig: "SSE"}.get(
        model_type, "server"
    )


def load_mcp_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> dict[str, McpServerConfig]:
    """Read a ``{"mcpServers": {name: config}}`` JSON file (Claude Desktop / Claude Code / Cursor).

    VS Code's ``{"servers": {...}}`` is accepted too. Servers marked ``"disabled": true`` are left out.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or one of its configs is invalid.
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config file {str(path)!r}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"MCP config file {str(path)!r} is not valid JSON: {exc.msg} "
            f"(line {exc.lineno}, column {exc.colno})"
        ) from None
    servers = document.get("mcpServers", document.get("servers")) if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'MCP config file {str(path)!r} has no "mcpServers" object')
    configs: dict[str, McpServerConfig] = {}
    for name, config in servers.items():
        if not isinstance(config, dict):
            raise ConfigError(f"MCP server {name!r} in {str(path)!r}: expected an object, got {config!r}")
        if config.get("disabled") is True:
            continue
        configs[name] = parse_server_config(name, config, environ=environ)
    return configs
