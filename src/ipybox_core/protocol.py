"""What ipybox adds to MCP for its own clients: ``_meta`` entries under ``ipybox.dev/``.

The ipybox service is a plain MCP server (Streamable HTTP, protocol 2026-07-28): any MCP client can
call ``execute_code`` and answer approvals as ``InputRequiredResult`` rounds. ipybox's own client
(:mod:`ipybox_core.remote`) adds a few ``_meta`` entries so that a conversation's parked call can be
found again from another process, and so results and approvals arrive as data, not prose:

Request ``_meta`` of ``tools/call execute_code``:

- ``ipybox.dev/session``: the conversation key (overrides the ``Ipybox-Session`` header);
- ``ipybox.dev/call``: the client's id for this call (e.g. the framework's tool call id);
- ``ipybox.dev/resume``: ``true``: never start code, continue the call parked under ``call``
  (the pending question is returned again); a ``gone`` error when there is none;
- ``ipybox.dev/client``: who answers (recorded as ``client:<name>`` in the audit log);
- ``ipybox.dev/output``: ``true``: with a ``progressToken``, each progress notification's
  ``message`` is a JSON object ``{"stream": "stdout" | "stderr", "text": ...}`` instead of the
  plain text (every client that sends a ``progressToken`` gets the output as the code prints it).

Input response ``content`` (next to ``action``): ``reason`` (a rejection's reason), ``arguments``
(edited arguments of an accepted call) and ``cancel`` (``true``: stop the execution).

Result ``_meta``: ``ipybox.dev/approval`` on an ``InputRequiredResult`` (the request as data),
``ipybox.dev/result`` on a finished execution (``ipybox.dev/notice``: the session's kernel was
restarted since its last call), ``ipybox.dev/error`` on a failure; ``ipybox.dev/streamed``: how
many characters of output this round sent as progress notifications (the last notification's
``progress``), so a client knows when it has them all. Output printed in a round's first 0.1 s is
held (a round that ends sooner stays one plain JSON response); for ``ipybox.dev/output`` clients
the output still held when the round ends is ``ipybox.dev/held_output``, a list of
``{"stream", "text"}`` that follows the notified output.

Tool ``cancel_waiting`` cancels the session's executions that wait for an approval when the
conversation moved on (``calls``: only these call ids; ``keep_calls``: never these; ``reason``:
what the pending calls are rejected with); it returns how many it cancelled.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, get_args

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import CodeError

PREFIX = "ipybox.dev/"
SESSION = PREFIX + "session"
CALL = PREFIX + "call"
RESUME = PREFIX + "resume"
CLIENT = PREFIX + "client"
OUTPUT = PREFIX + "output"
STREAMED = PREFIX + "streamed"
HELD_OUTPUT = PREFIX + "held_output"
APPROVAL = PREFIX + "approval"
RESULT = PREFIX + "result"
ERROR = PREFIX + "error"
NOTICE = PREFIX + "notice"

ErrorKind = Literal["busy", "gone", "decided", "timeout", "kernel_died", "cancelled", "unavailable"]
"""Why ``execute_code`` gave no result: another execution runs; the parked call is gone (answered,
expired, reset, service restarted); another client decided the approval first; the code timed out;
the kernel died; the execution was cancelled; the kernel could not be started."""
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)


def approval_data(request: ApprovalRequest) -> dict[str, Any]:
    """``request`` as JSON data: what a client needs to rebuild it."""
    return {
        "id": request.id,
        "kind": request.kind,
        "server": request.server,
        "tool": request.tool,
        "args": request.args,
        "annotations": {k: v for k, v in dataclasses.asdict(request.annotations).items() if v is not None},
    }


def result_data(
    *, text: str, error: CodeError | None, execution_count: int | None, omitted_chars: int
) -> dict[str, Any]:
    """A finished execution as JSON data (its images travel as MCP image content)."""
    return {
        "text": text,
        "error": None
        if error is None
        else {"ename": error.ename, "evalue": error.evalue, "traceback": error.traceback},
        "execution_count": execution_count,
        "omitted_chars": omitted_chars,
    }


def error_data(kind: ErrorKind, message: str) -> dict[str, str]:
    return {"kind": kind, "message": message}


def png_of(data: str) -> bytes:
    return base64.b64decode(data)


def meta_value(meta: Mapping[str, Any] | None, key: str) -> Any:
    """``meta[key]`` if ``meta`` has it (``_meta`` objects are pydantic models or dicts)."""
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta.get(key)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(key, getattr(meta, key, None))
