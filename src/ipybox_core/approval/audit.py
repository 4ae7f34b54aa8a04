"""Audit log of approval decisions, one JSON object per line."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ipybox_core._safe_fs import SafeDir, anchored
from ipybox_core.approval.request import ApprovalDecision, ApprovalRecord, ApprovalRequest

_READ_LIMIT = 256 * 2**20


class AuditLog:
    """Appends an :class:`ApprovalRecord` per decided request to a JSON-lines file.

    Each line holds the time, the request (kind, server, tool, arguments), the decision, who or
    what decided (``user``, ``policy:never``, ``policy:allow github.*``, ``timeout``, ...) and the
    reason. Lines are written with a single ``write`` on an append-mode file, so several executors
    may share one log.

    The log may lie where sandboxed code can write (the workspace). Its directory is resolved once,
    here; the path below ``untrusted_below`` (when the log lies inside it: pass the workspace), or
    else the file itself, is never followed: a symlink, FIFO, device or hard link planted there makes
    :meth:`record` raise :class:`~ipybox_core.errors.UnsafePathError`, and no open can block.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, untrusted_below: str | os.PathLike[str] | None = None
    ) -> None:
        self.path = Path(path)
        where = anchored(self.path, untrusted_below)
        self._directory, self._name = where.parent, where.name
        with SafeDir.open(self._directory, create=True):
            pass

    def record(self, request: ApprovalRequest, decision: ApprovalDecision) -> ApprovalRecord:
        """Append the record of ``request``'s decision (blocking file I/O: call it off the event loop)."""
        entry = ApprovalRecord(
            time=time.time(),
            request_id=request.id,
            kind=request.kind,
            server=request.server,
            tool=request.tool,
            args=request.args,
            approved=decision.approved,
            decided_by=decision.decided_by,
            reason=decision.reason,
            edited_args=decision.arguments,
        )
        line = json.dumps(asdict(entry), default=repr, ensure_ascii=False) + "\n"
        with SafeDir.open(self._directory) as directory:
            directory.append(self._name, line.encode("utf-8"))
        return entry

    def note(self, request: ApprovalRequest, message: str) -> None:
        """Append a notice about ``request``'s call, e.g. that its MCP server had to be restarted
        (a line with ``"notice"`` instead of a decision; blocking file I/O)."""
        entry = {
            "time": time.time(),
            "request_id": request.id,
            "server": request.server,
            "tool": request.tool,
            "notice": message,
        }
        line = json.dumps(entry, default=repr, ensure_ascii=False) + "\n"
        with SafeDir.open(self._directory) as directory:
            directory.append(self._name, line.encode("utf-8"))

    def read(self) -> list[ApprovalRecord]:
        """All decision records written so far (for tests and tooling)."""
        return [ApprovalRecord(**entry) for entry in self._entries() if "notice" not in entry]

    def read_notices(self) -> list[dict[str, Any]]:
        """All notices written so far (see :meth:`note`)."""
        return [entry for entry in self._entries() if "notice" in entry]

    def _entries(self) -> list[dict[str, Any]]:
        try:
            with SafeDir.open(self._directory) as directory:
                if directory.lstat(self._name) is None:
                    return []
                data = directory.read_bytes(self._name, limit=_READ_LIMIT)
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
