"""ZMQ channels to one kernel incarnation (shell, iopub, control), signed with jupyter_client's Session."""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import DELIM, Session

from ipybox_core.kernel._iopub import omitted_message
from ipybox_core.kernel._ipc_paths import PinnedSockets
from ipybox_core.kernel._json_cost import parse_fits
from ipybox_core.kernel._launch import ConnectionInfo
from ipybox_core.kernel._stream_limit import max_parsed_message_bytes

Message = dict[str, Any]
logger = logging.getLogger(__name__)

# zmq retries connecting every RECONNECT_IVL ms until the kernel has bound its sockets; the default
# (100 ms) would add up to that much to every start.
_RECONNECT_IVL_MS = 10
_IOPUB_RCVHWM = 8
_HEADER_BYTES = 64 * 1024  # a header frame beyond this is a hostile one (honest ones: ~300 bytes)
_SIGNATURE_BYTES = 1024


CHANNELS = ("shell", "iopub", "control")
"""The kernel sockets ipybox talks to (stdin and heartbeat are not used)."""


class KernelChannels:
    """The client side of a kernel's shell, iopub and control sockets.

    With ``pinned`` (descriptors of the sockets, see :mod:`._ipc_paths`) the channels connect
    through those descriptors rather than by path; they own and close them.

    With ``max_message_bytes`` what a message costs the host is bounded before it is parsed: a
    larger message, or one whose parse could take more than
    :func:`~._stream_limit.max_parsed_message_bytes`, becomes a report that a display was omitted:
    its frames stay zmq's buffers, never copied or parsed. (``zmq.MAXMSGSIZE`` is not used: zmq
    drops the connection over it, and an ipc subscription did not come back.)
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
        self._max_parsed_bytes = (
            None if max_message_bytes is None else max_parsed_message_bytes(max_message_bytes)
        )

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
            frames: list[zmq.Frame] = await socket.recv_multipart(copy=False)
        except zmq.Again:
            return None
        try:
            return self._decode(frames)
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:  # unsigned or malformed
            logger.warning("dropped an unreadable kernel message: %s", exc)
            return None

    def _decode(self, frames: list[zmq.Frame]) -> Message:
        """Check the signature and parse a message, if its size and parse cost are within the limits.

        The frames stay zmq's buffers until needed: the signature is computed over them, and only
        the small header frames and a content frame that may be parsed are copied. Leaner than
        ``Session.deserialize``, which also parses every date in both headers: about half of the
        client's time per message, for fields ipybox never reads.
        """
        parts = frames[_delimiter(frames) + 1 :]
        signature, header_frame, parent_frame, _, content_frame = parts[:5]
        if max(len(header_frame), len(parent_frame)) > _HEADER_BYTES or len(signature) > _SIGNATURE_BYTES:
            raise ValueError("a header frame is over its limit")
        if not hmac.compare_digest(signature.bytes, self.session.sign([part.buffer for part in parts[1:5]])):
            raise ValueError("invalid message signature")
        header = json.loads(header_frame.bytes)
        parent_header = json.loads(parent_frame.bytes)
        size = sum(len(frame) for frame in frames)
        if self._max_message_bytes is not None and size > self._max_message_bytes:
            return self._omitted(header, parent_header, size, f"over {self._max_message_bytes} bytes")
        content = content_frame.bytes
        if self._max_parsed_bytes is not None and not parse_fits(content, self._max_parsed_bytes):
            return self._omitted(
                header, parent_header, size, f"could take over {self._max_parsed_bytes} bytes to parse"
            )
        return {
            "header": header,
            "msg_type": header["msg_type"],
            "parent_header": parent_header,
            "content": json.loads(content),
        }

    @staticmethod
    def _omitted(header: Message, parent_header: Message, size: int, why: str) -> Message:
        logger.warning("omitted a kernel message of %d bytes (%s)", size, why)
        return omitted_message(header, parent_header, size)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for socket in (self.shell, self.iopub, self.control):
            socket.close(linger=0)
        if self._pinned is not None:
            self._pinned.close()


def _delimiter(frames: list[zmq.Frame]) -> int:
    """Where the routing identities end (only frames of the delimiter's length are copied)."""
    for index, frame in enumerate(frames):
        if len(frame) == len(DELIM) and frame.bytes == DELIM:
            return index
    raise ValueError("no delimiter frame")
