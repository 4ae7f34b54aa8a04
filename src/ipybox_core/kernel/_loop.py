"""The one execute loop of every kernel backend: request, output events, reply, timeouts.

It runs over a :class:`~._transport.Transport` (local ZMQ channels or a gateway's websocket) and
owns what both share: the pausable deadline and its interrupts, then a restart of a kernel that
ignores them; output limits; output marks; the final event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

from ipybox_core.kernel._execution import (
    execute_request,
    finished_event,
    interrupted_timeout,
    timeout_by_restart,
)
from ipybox_core.kernel._iopub import output_events
from ipybox_core.kernel._marks import OutputMarks, mark_of
from ipybox_core.kernel._stream_limit import StreamLimiter
from ipybox_core.kernel._timeout_guard import TimeoutGuard
from ipybox_core.kernel._transport import Transport
from ipybox_core.kernel.deadline import Deadline
from ipybox_core.kernel.events import KernelEvent

logger = logging.getLogger(__name__)

# How often a waiting execution checks the deadline and whether the kernel still lives.
POLL_INTERVAL = 0.1
# The kernel sends the reply before it reports idle (a gateway forwards shell and iopub
# independently); after idle, a reply this late is a lost one.
REPLY_TIMEOUT = 1.0


@dataclass(frozen=True)
class LoopSettings:
    """What the loop needs of the kernel's configuration."""

    output_limit: int
    interrupt_grace: float
    hidden_prefixes: Sequence[str] = ()


async def execute_loop(
    transport: Transport,
    code: str,
    deadline: Deadline | None,
    silent: bool,
    settings: LoopSettings,
    marks: OutputMarks | None = None,
) -> AsyncGenerator[KernelEvent, None]:
    """Run ``code`` over ``transport`` and yield its events; the last is ``ExecutionFinished``.

    See :meth:`Kernel.execute <ipybox_core.kernel.Kernel.execute>` for the contract.
    """
    ended = False
    if marks is not None:
        marks.begin()
    try:
        started = time.monotonic()
        msg_id = await transport.send("shell", "execute_request", execute_request(code, silent))
        limiter = StreamLimiter(settings.output_limit)
        guard = TimeoutGuard(deadline, settings.interrupt_grace, transport.interrupt)
        while True:
            if guard.check():
                assert deadline is not None
                ended = True
                transport.finish(abandoned=False)
                raise await timeout_by_restart(
                    deadline, settings.interrupt_grace, transport.restart, transport.restart_failures
                )
            message = await transport.output(guard.wait_time(POLL_INTERVAL))
            if message is None:
                await transport.check()
                continue
            if marks is not None and (mark := mark_of(message)) is not None:
                marks.seen(mark)  # whatever its parent: everything published before it is out
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            msg_type, content = message["msg_type"], message["content"]
            if msg_type == "status" and content.get("execution_state") == "idle":
                break
            if msg_type == "execute_input" or (silent and msg_type == "status"):
                guard.code_started()  # (silent code has no execute_input: busy stands in)
            for event in output_events(
                msg_type,
                content,
                limiter,
                timed_out=guard.timed_out,
                hidden_prefixes=settings.hidden_prefixes,
                text_limit=settings.output_limit,
            ):
                yield event
        if marks is not None:
            marks.end()
        reply = await _receive_reply(transport, msg_id)
        await transport.settle()  # an interrupt still on its way must not hit the next execution
        for event in limiter.finish():
            yield event
        ended = True
        transport.finish(abandoned=False)
        if guard.timed_out:  # even if the code swallowed the KeyboardInterrupt
            assert deadline is not None
            raise interrupted_timeout(deadline)
        yield finished_event(reply, started)
    finally:
        if marks is not None:
            marks.end()
        if not ended:
            transport.finish(abandoned=True)


async def _receive_reply(transport: Transport, msg_id: str) -> dict[str, Any]:
    """The execute reply; the kernel sends it before it reports idle, so it is due already.

    An interrupt that hits ipykernel itself rather than the code (while it prepares the cell) makes
    it drop the reply ("KeyboardInterrupt caught in kernel"); then the execution counts as aborted.
    """
    give_up = time.monotonic() + REPLY_TIMEOUT
    while time.monotonic() < give_up:
        message = await transport.reply(POLL_INTERVAL)
        if message is None:
            await transport.check()
        elif message["parent_header"].get("msg_id") == msg_id and message["msg_type"] == "execute_reply":
            return dict(message["content"])
    logger.warning("the kernel finished an execution without replying; reporting it as aborted")
    return {"status": "aborted"}
