"""Settings of ``ipybox mcp``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ipybox_core.approval.policy import ApprovalRules
from ipybox_core.errors import ConfigError

GATEWAY_TOKEN_ENV = "IPYBOX_GATEWAY_TOKEN"
"""Where ``ipybox mcp/serve --kernel-gateway`` finds the gateway's token (never on the command line)."""


@dataclass(frozen=True)
class McpServerSettings:
    """How the ipybox MCP server runs its kernel and answers its clients."""

    workspace: Path = field(default_factory=Path.cwd)
    """The kernel's working directory; the generated API goes to ``<workspace>/mcptools``."""
    api_dir: Path | None = None
    """Where the generated API goes instead (its last component is the package name)."""
    sandbox: bool | Path = False
    """``True``: the default bubblewrap sandbox; a path: a sandbox config file; ``False``: none."""
    config: Path | None = None
    """An ``{"mcpServers": ...}`` file whose servers are registered at start."""
    env_file: Path | None = None
    """The ``.env`` file with secrets for MCP configs; default ``<workspace>/.env``."""
    auto_approve: bool = False
    """Approve every MCP call without asking the user."""
    timeout: float = 120.0
    """Default ``execute_code`` timeout in seconds (time waiting for approval does not count)."""
    output_limit: int = 30_000
    """Default maximum characters of ``execute_code`` text returned to the client."""
    approval_timeout: float = 600.0
    """Seconds an approval may stay unanswered before the call is rejected."""
    install_timeout: float = 300.0
    """Seconds ``install_package`` may take."""
    pip_args: tuple[str, ...] = ()
    """Extra pip options for every ``install_package`` (e.g. ``--index-url URL``); set by the
    operator, never by the agent."""
    max_sessions: int = 100
    """Over Streamable HTTP: the most client sessions that have a kernel at once."""
    idle_timeout: float = 900.0
    """Over Streamable HTTP: seconds after which an idle session's kernel is stopped (its next
    ``execute_code`` gets a fresh kernel and a note saying so)."""
    kernel_gateway: str | None = None
    """Run every kernel on this Jupyter Kernel / Enterprise Gateway (``http(s)://host:port``)."""
    gateway_token: str | None = field(default=None, repr=False)
    """The gateway's token (the command line reads it from :data:`GATEWAY_TOKEN_ENV`)."""
    audit_log: Path | None = None
    """A JSON-lines file recording every approval decision and who made it (``client:<name>``)."""
    warm_sessions: int = 1
    """Over Streamable HTTP: kernels kept started for the next new client sessions (0: each new
    session starts its kernel on its first call)."""
    approval_rules: ApprovalRules | None = None
    """Which MCP calls run without asking, which are refused, which are asked (``--approval-rules``);
    ``None``: every call is asked (or, with ``auto_approve``, none)."""
    require_servers: bool = False
    """Fail at start when a config MCP server cannot start, instead of serving without it."""
    header_timeout: float = 10.0
    """Over Streamable HTTP: seconds a client has to send a request's headers (from connecting, or
    from the end of its last response; over HTTPS the TLS handshake too); slower connections are
    closed, so clients without the token cannot hold connections open."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "workspace", Path(self.workspace).resolve())
        if self.audit_log is not None:
            object.__setattr__(self, "audit_log", Path(self.audit_log).expanduser().resolve())
        if self.api_dir is not None:
            object.__setattr__(self, "api_dir", Path(self.api_dir).expanduser().resolve())
        for name in ("timeout", "approval_timeout", "install_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {getattr(self, name)!r}")
        if not 0 < self.header_timeout < math.inf:
            raise ConfigError(
                f"header_timeout must be a finite number of seconds above 0, got {self.header_timeout!r}"
            )
        if self.warm_sessions < 0:
            raise ConfigError(f"warm_sessions must be 0 or more, got {self.warm_sessions}")
        if self.max_sessions < 1:
            raise ConfigError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.auto_approve and self.approval_rules is not None:
            raise ConfigError("--yes and --approval-rules exclude each other: --yes approves every call")
        if self.output_limit < 100:
            raise ConfigError(f"output_limit must be at least 100 characters, got {self.output_limit}")

    @property
    def dotenv_path(self) -> Path:
        return self.env_file if self.env_file is not None else self.workspace / ".env"
