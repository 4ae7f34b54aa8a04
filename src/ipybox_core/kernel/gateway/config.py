"""Where a Jupyter Kernel Gateway / Enterprise Gateway is and how ipybox uses it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ipybox_core.errors import ConfigError

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class GatewayConfig:
    """A Jupyter Kernel Gateway or Enterprise Gateway that runs the kernels, and the address of the
    application's tool server as those kernels reach it.

    ``CodeExecutor(kernel_gateway="http://gw:8888", gateway_token="...")`` builds one from a URL;
    pass a ``GatewayConfig`` for the other settings.
    """

    url: str
    """``http(s)://host:port`` (plus the gateway's base URL path, if it has one)."""
    token: str | None = None
    """Sent as ``Authorization: token <token>`` (``KernelGatewayApp.auth_token``)."""
    kernel_name: str | None = None
    """Kernel spec to start; None: the gateway's default."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers for every request and the websocket (e.g. for a proxy in front)."""
    verify: bool | str = True
    """TLS verification of an ``https`` gateway: True, False, or the path of a CA bundle."""
    startup_timeout: float = 120.0
    """Seconds a kernel may take to start and be set up (a pod may have to be scheduled and its
    image pulled); replaces ``KernelConfig.startup_timeout`` for gateway kernels."""
    request_timeout: float = 30.0
    """Seconds any other REST call may take."""
    liveness_interval: float = 2.0
    """Seconds between checks of the kernel's state on the gateway while code runs."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest websocket message accepted (a big image or display)."""
    tool_server_host: str = "127.0.0.1"
    """Address the tool server listens on; use ``0.0.0.0`` (or an interface address) when the kernels
    run on other machines."""
    tool_server_port: int = 0
    """Port of the tool server; 0 picks a free one."""
    tool_server_advertise: str | None = None
    """Host name or address the kernels use to reach the tool server (default: ``tool_server_host``)."""
    tool_server_certfile: str | None = None
    """Serve the tool server over TLS with this certificate (PEM) ..."""
    tool_server_keyfile: str | None = None
    """... and this private key."""
    tool_server_ca: str | None = None
    """A CA bundle (PEM file on this machine) the kernels use to verify the tool server's
    certificate; its content is shipped into the kernel. None: the kernel's default trust store."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"kernel_gateway must be an http(s)://host:port URL, got {self.url!r}")
        object.__setattr__(self, "url", self.url.rstrip("/"))
        object.__setattr__(self, "headers", dict(self.headers))
        for name in ("startup_timeout", "request_timeout", "liveness_interval"):
            value = getattr(self, name)
            if not value > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.max_message_bytes < 1024:
            raise ConfigError(f"max_message_bytes is too small: {self.max_message_bytes}")
        if not 0 <= self.tool_server_port < 65536:
            raise ConfigError(f"tool_server_port must be 0..65535, got {self.tool_server_port}")
        if bool(self.tool_server_certfile) != bool(self.tool_server_keyfile):
            raise ConfigError("tool_server_certfile and tool_server_keyfile go together")

    @property
    def websocket_url(self) -> str:
        """The gateway's URL with the ``ws``/``wss`` scheme."""
        return "ws" + self.url[len("http") :]

    @property
    def auth_headers(self) -> dict[str, str]:
        """Headers of every request: the token (if any) and :attr:`headers`."""
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        return headers

    def __repr__(self) -> str:  # never show the token
        token = "***" if self.token else None
        return f"GatewayConfig(url={self.url!r}, token={token!r}, kernel_name={self.kernel_name!r})"
