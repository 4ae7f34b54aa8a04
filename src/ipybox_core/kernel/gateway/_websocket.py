"""A kernel's shell, iopub and control channels over the gateway's websocket (Jupyter's JSON protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import ssl
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ipybox_core.errors import KernelError
from ipybox_core.kernel._iopub import omitted_message
from ipybox_core.kernel._json_cost import parse_fits
from ipybox_core.kernel._stream_limit import max_iopub_frame_bytes, max_parsed_message_bytes
from ipybox_core.kernel.gateway.config import GatewayConfig

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

Message = dict[str, Any]
logger = logging.getLogger(__name__)

INSTALL_HINT = "kernels on a gateway need the `websockets` package: pip install 'ipybox[gateway]'"
_PROTOCOL_VERSION = "5.3"
_PING_SECONDS = 20.0
_MAX_QUEUE = 2  # messages websockets reads ahead of us: each may be max_size bytes
_MESSAGE_TOO_BIG = 1009  # the websocket close code for a message over max_size


class GatewayChannels:
    """One websocket to one kernel on the gateway.

    A background task reads every message. Messages reach :meth:`receive` only while
    :meth:`listen` is on (between executions nothing accumulates). The gateway's own status
    messages are tracked all the time: ``restarting`` (the gateway restarted a kernel that died)
    increments :attr:`restarts`, ``dead`` (that restart failed) sets :attr:`dead`.

    What a message costs is bounded before it is parsed: a message over ``max_message_bytes``
    ends the connection (websockets refuses it unread; the next execution reconnects), and one
    whose parse could take more than :func:`~ipybox_core.kernel._stream_limit.max_parsed_message_bytes`
    becomes a report that a display was omitted (its content never parsed).
    """

    def __init__(self, connection: ClientConnection, session: str, max_message_bytes: int) -> None:
        self._ws = connection
        self.session = session
        self.max_message_bytes = max_message_bytes
        self._max_parsed_bytes = max_parsed_message_bytes(max_message_bytes)
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._listening = False
        self.restarts = 0
        self.dead = False
        self.lost: str | None = None
        """Why the connection ended (None while it is open)."""
        self._reader = asyncio.create_task(self._read(), name="ipybox-gateway-websocket")

    @classmethod
    async def open(
        cls, config: GatewayConfig, kernel_id: str, timeout: float, *, output_limit: int | None = None
    ) -> GatewayChannels:
        """Connect to ``/api/kernels/<id>/channels``; raises :class:`KernelError` when that fails.

        With ``output_limit`` (the kernel's), messages are limited to the largest an honest kernel
        sends with it (and to ``config.max_message_bytes``).
        """
        try:
            from websockets.asyncio.client import connect
            from websockets.exceptions import InvalidStatus, WebSocketException
        except ImportError:  # pragma: no cover - depends on the installation
            raise KernelError(INSTALL_HINT) from None
        session = uuid.uuid4().hex
        url = f"{config.websocket_url}/api/kernels/{kernel_id}/channels?session_id={session}"
        max_size = config.max_message_bytes
        if output_limit is not None:
            max_size = min(max_size, max_iopub_frame_bytes(output_limit))
        try:
            connection = await connect(
                url,
                additional_headers=config.auth_headers,
                compression=None,
                max_size=max_size,
                max_queue=_MAX_QUEUE,
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
        return cls(connection, session, max_size)

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

    async def aclose(self) -> None:
        if self.lost is None:
            self.lost = "closed by ipybox"
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

        reason = "the gateway closed the connection"
        try:
            while True:
                raw = await self._ws.recv(decode=False)  # bytes: UTF-8 text is not widened to str
                self._acknowledge_now()
                message = _decode(raw, self._max_parsed_bytes)
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
        except ConnectionClosedOK:
            pass
        except ConnectionClosed as exc:
            reason = f"websocket error: {exc!r}"
            if exc.sent is not None and exc.sent.code == _MESSAGE_TOO_BIG:
                reason = (
                    f"the kernel sent a message over {self.max_message_bytes} bytes, more than an honest "
                    "kernel sends with its output limit; it was refused unread"
                )
                logger.warning("closed the websocket to a kernel: %s", reason)
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


def _decode(raw: bytes, max_parsed_bytes: int) -> Message | None:
    """A JSON text message of the websocket protocol; binary (buffer-carrying) messages are skipped.

    One whose parse could take more than ``max_parsed_bytes`` becomes an omitted-display report
    (its header and parent header read from the start of the text, its content never parsed).
    """
    if not raw.startswith(b"{"):  # the protocol's binary messages start with a count of buffers
        return None
    try:
        if not parse_fits(raw, max_parsed_bytes):
            envelope = _envelope(raw)
            logger.warning(
                "omitted a kernel message of %d bytes (could take over %d bytes to parse)",
                len(raw),
                max_parsed_bytes,
            )
            return omitted_message(envelope.get("header"), envelope.get("parent_header"), len(raw))
        message = json.loads(raw)
        header = message.get("header") or {}
        return {
            "header": header,
            "msg_type": message.get("msg_type") or header.get("msg_type", ""),
            "parent_header": message.get("parent_header") or {},
            "content": message.get("content") or {},
            "channel": message.get("channel", ""),
        }
    except (ValueError, AttributeError, RecursionError) as exc:
        logger.warning("dropped an unreadable message from the gateway: %s", exc)
        return None


_ENVELOPE_BYTES = 64 * 1024
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _after_space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match is not None else at


def _envelope(raw: bytes) -> dict[str, Any]:
    """The top-level members of a message's JSON text that precede ``content`` and lie within its
    first 64 KiB (the gateway writes ``header`` and ``parent_header`` first); nothing else is parsed."""
    text = raw[:_ENVELOPE_BYTES].decode("utf-8", "replace")
    members: dict[str, Any] = {}
    at = _after_space(text, 1)
    try:
        while text.startswith('"', at):
            key, at = _DECODER.raw_decode(text, at)
            at = _after_space(text, at)
            if not text.startswith(":", at) or key == "content":
                break
            value, at = _DECODER.raw_decode(text, _after_space(text, at + 1))
            members[key] = value
            at = _after_space(text, at)
            if not text.startswith(",", at):
                break
            at = _after_space(text, at + 1)
    except (ValueError, RecursionError):  # cut off by the 64 KiB: what was read so far
        pass
    return members


def _ssl_context(config: GatewayConfig) -> ssl.SSLContext:
    if config.verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(config.verify, str):
        return ssl.create_default_context(cafile=config.verify)
    return ssl.create_default_context()
