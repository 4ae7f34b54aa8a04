"""ZMQ channels to one kernel incarnation (shell, iopub, control), signed with jupyter_client's Session."""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import DELIM, Session

from ipybox_core.inkernel._bootstrap import DISPLAY_OMITTED_MIME
from ipybox_core.kernel._ipc_paths import PinnedSockets
from ipybox_core.kernel._launch import ConnectionInfo

Message = dict[str, Any]
logger = logging.getLogger(__name__)

# zmq retries connecting every RECONNECT_IVL ms until the kernel has bound its sockets; the default
# (100 ms) would add up to that much to every start.
_RECONNECT_IVL_MS = 10
_IOPUB_RCVHWM = 8


CHANNELS = ("shell", "iopub", "control")
"""The kernel sockets ipybox talks to (stdin and heartbeat are not used)."""


class KernelChannels:
    """The client side of a kernel's shell, iopub and control sockets.

    With ``pinned`` (descriptors of the sockets, see :mod:`._ipc_paths`) the channels connect
    through those descriptors rather than by path; they own and close them.
    """

    def __init__(
        self,
        connection: ConnectionInfo,
        pinned: PinnedSockets | None = None,
        *,
        max_message_bytes: int | None = None,
    ) -> None:
        self.session = Session(key=connection.key.encode(), signature_scheme="hmac-sha256")
        self._pinned = pinned
        self._max_message_bytes = max_message_bytes

        def address(channel: str) -> str:
            if pinned is None:
                return connection.address(channel)
            return pinned.address(connection.socket_path(channel))

        context = zmq.asyncio.Context.instance()
        self.shell = self._connect(context, zmq.DEALER, address("shell"))
        self.iopub = self._connect(context, zmq.SUB, address("iopub"))
        self.control = self._connect(context, zmq.DEALER, address("control"))
        self._timeouts: dict[zmq.asyncio.Socket, int] = {}
        self.closed = False

    @staticmethod
    def _connect(context: zmq.asyncio.Context, kind: int, address: str) -> zmq.asyncio.Socket:
        socket = context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.RECONNECT_IVL, _RECONNECT_IVL_MS)
        if kind == zmq.SUB:
            socket.setsockopt(zmq.SUBSCRIBE, b"")
            # Few whole messages queued here: a flood waits in the kernel's send queue (its memory),
            # not in the application's. Set before connect(), or it does not apply.
            socket.setsockopt(zmq.RCVHWM, _IOPUB_RCVHWM)
        socket.connect(address)
        return socket

    def send(self, socket: zmq.asyncio.Socket, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request; returns its msg_id (replies and outputs carry it as parent)."""
        message = self.session.msg(msg_type, content)
        self.session.send(socket, message)
        return str(message["header"]["msg_id"])

    async def receive(self, socket: zmq.asyncio.Socket, timeout: float) -> Message | None:
        """The next message on ``socket``, or None if none arrives within ``timeout`` seconds."""
        # A receive timeout on the socket costs one timer; poll() + recv would cost a poller, two
        # futures and the timer for every message.
        timeout_ms = max(0, int(timeout * 1000))
        if self._timeouts.get(socket) != timeout_ms:
            socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
            self._timeouts[socket] = timeout_ms
        try:
            raw: list[zmq.Frame] = await socket.recv_multipart(copy=False)
        except zmq.Again:
            return None
        frames = [frame.bytes for frame in raw]
        size = sum(len(frame) for frame in frames)
        try:
            if self._max_message_bytes is not None and size > self._max_message_bytes:
                return self._oversized(frames, size)
            return self._decode(frames)
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:  # unsigned or malformed
            logger.warning("dropped an unreadable kernel message: %s", type(exc).__name__)
            return None

    def _oversized(self, frames: list[bytes], size: int) -> Message:
        """A signed message too large to parse becomes a report that a display was omitted (its
        header is parsed, its content never is)."""
        parts = frames[frames.index(DELIM) + 1 :]
        if not hmac.compare_digest(parts[0], self.session.sign(parts[1:5])):
            raise ValueError("invalid message signature")
        header = json.loads(parts[1])
        logger.warning("omitted a kernel message of %d bytes (over %d)", size, self._max_message_bytes)
        report = {"displays": 1, "trimmed": 0, "size": size, "mime_types": []}
        return {
            "header": header,
            "msg_type": "display_data",
            "parent_header": json.loads(parts[2]),
            "content": {"data": {DISPLAY_OMITTED_MIME: report}, "metadata": {}},
        }

    def _decode(self, frames: list[bytes]) -> Message:
        """Check the signature and parse a message.

        Leaner than ``Session.deserialize``, which also parses every date in both headers: about half
        of the client's time per message, for fields ipybox never reads.
        """
        parts = frames[frames.index(DELIM) + 1 :]
        if not hmac.compare_digest(parts[0], self.session.sign(parts[1:5])):
            raise ValueError("invalid message signature")
        header = json.loads(parts[1])
        return {
            "header": header,
            "msg_type": header["msg_type"],
            "parent_header": json.loads(parts[2]),
            "content": json.loads(parts[4]),
        }

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for socket in (self.shell, self.iopub, self.control):
            socket.close(linger=0)
        if self._pinned is not None:
            self._pinned.close()
