"""A kernel's shell, iopub and control channels over the gateway's websocket (Jupyter's JSON protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ipybox_core.errors import KernelError
from ipybox_core.kernel.gateway.config import GatewayConfig

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

Message = dict[str, Any]
logger = logging.getLogger(__name__)

INSTALL_HINT = "kernels on a gateway need the `websockets` package: pip install 'ipybox[gateway]'"
_PROTOCOL_VERSION = "5.3"
_PING_SECONDS = 20.0


class GatewayChannels:
    """One websocket to one kernel on the gateway.

    A background task reads every message. Messages reach :meth:`receive` only while
    :meth:`listen` is on (between executions nothing accumulates). The gateway's own status
    messages are tracked all the time: ``restarting`` (the gateway restarted a kernel that died)
    increments :attr:`restarts`, ``dead`` (that restart failed) sets :attr:`dead`.
    """

    def __init__(self, connection: ClientConnection, session: str) -> None:
        self._ws = connection
        self.session = session
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._listening = False
        self.restarts = 0
        self.dead = False
        self.lost: str | None = None
        """Why the connection ended (None while it is open)."""
        self._reader = asyncio.create_task(self._read(), name="ipybox-gateway-websocket")

    @classmethod
    async def open(cls, config: GatewayConfig, kernel_id: str, timeout: float) -> GatewayChannels:
        """Connect to ``/api/kernels/<id>/channels``; raises :class:`KernelError` when that fails."""
        try:
            from websockets.asyncio.client import connect
            from websockets.exceptions import InvalidStatus, WebSocketException
        except ImportError:  # pragma: no cover - depends on the installation
            raise KernelError(INSTALL_HINT) from None
        session = uuid.uuid4().hex
        url = f"{config.websocket_url}/api/kernels/{kernel_id}/channels?session_id={session}"
        try:
            connection = await connect(
                url,
                additional_headers=config.auth_headers,
                compression=None,
                max_size=config.max_message_bytes,
                open_timeout=timeout,
                ping_interval=_PING_SECONDS,
                ping_timeout=_PING_SECONDS,
                close_timeout=2,
                proxy=None,
                ssl=_ssl_context(config) if url.startswith("wss:") else None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise KernelError(
                f"the kernel gateway at {config.url} refused the websocket of kernel {kernel_id}: "
                f"HTTP {status}" + (" (check the gateway token)" if status in (401, 403) else "")
            ) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise KernelError(
                f"cannot open the websocket of kernel {kernel_id} on the gateway at {config.url}: {exc!r}"
            ) from None
        return cls(connection, session)

    @property
    def closed(self) -> bool:
        return self.lost is not None

    def listen(self, on: bool) -> None:
        """Start (dropping anything queued before) or stop passing kernel messages to :meth:`receive`."""
        self._listening = on
        while not self._queue.empty():
            self._queue.get_nowait()

    async def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request on ``channel`` (``shell`` or ``control``); returns its msg_id."""
        msg_id = uuid.uuid4().hex
        message = {
            "header": {
                "msg_id": msg_id,
                "msg_type": msg_type,
                "username": "ipybox",
                "session": self.session,
                "date": datetime.now(UTC).isoformat(),
                "version": _PROTOCOL_VERSION,
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        if self.lost is not None:
            raise KernelError(f"the websocket to the kernel is closed: {self.lost}")
        try:
            await self._ws.send(json.dumps(message))
        except Exception as exc:
            raise KernelError(f"lost the websocket to the kernel: {exc!r}") from None
        return msg_id

    async def receive(self, timeout: float) -> Message | None:
        """The next message, or None if none arrives within ``timeout`` seconds or the socket is closed."""
        if self._queue.empty() and self.lost is not None:
            return None
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                return await self._queue.get()
        except TimeoutError:
            return None

    async def close(self) -> None:
        if self.lost is None:
            self.lost = "closed by ipybox"
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader

    async def _read(self) -> None:
        reason = "the gateway closed the connection"
        try:
            async for raw in self._ws:
                self._acknowledge_now()
                message = _decode(raw)
                if message is None:
                    continue
                if message["msg_type"] == "status" and not message["parent_header"]:
                    state = message["content"].get("execution_state")
                    if state == "restarting":
                        self.restarts += 1
                    elif state == "dead":
                        self.dead = True
                if self._listening:
                    self._queue.put_nowait(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"websocket error: {exc!r}"
        finally:
            if self.lost is None:
                close = getattr(self._ws, "close_reason", None) or ""
                self.lost = reason + (f" ({close})" if close else "")
            self._queue.put_nowait(None)  # wakes a waiting receive()

    def _acknowledge_now(self) -> None:
        """Acknowledge received data at once instead of after the delayed-ACK timer (Linux).

        The gateway (tornado) writes without TCP_NODELAY: after the first message of an execution,
        Nagle's algorithm holds the next ones until our ACK, which Linux delays by up to 40 ms.
        """
        quickack = getattr(socket, "TCP_QUICKACK", None)
        if quickack is None:
            return
        sock = self._ws.transport.get_extra_info("socket") if self._ws.transport is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)


def _decode(raw: str | bytes) -> Message | None:
    """A JSON text message of the websocket protocol; binary (buffer-carrying) messages are skipped."""
    if isinstance(raw, bytes):
        return None
    try:
        message = json.loads(raw)
        header = message.get("header") or {}
        return {
            "header": header,
            "msg_type": message.get("msg_type") or header.get("msg_type", ""),
            "parent_header": message.get("parent_header") or {},
            "content": message.get("content") or {},
            "channel": message.get("channel", ""),
        }
    except (ValueError, AttributeError) as exc:
        logger.warning("dropped an unreadable message from the gateway: %s", exc)
        return None


def _ssl_context(config: GatewayConfig) -> ssl.SSLContext:
    if config.verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(config.verify, str):
        return ssl.create_default_context(cafile=config.verify)
    return ssl.create_default_context()
