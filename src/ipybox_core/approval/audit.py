"""Audit log of approval decisions, one JSON object per line."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from ipybox_core.approval.request import ApprovalDecision, ApprovalRecord, ApprovalRequest


class AuditLog:
    """Appends an :class:`ApprovalRecord` per decided request to a JSON-lines file.

    Each line holds the time, the request (kind, server, tool, arguments), the decision, who or
    what decided (``user``, ``policy:never``, ``rule:allow github.*``, ``timeout``, ...) and the
    reason. Lines are written with a single ``write`` on an append-mode file, so several executors
    may share one log.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, request: ApprovalRequest, decision: ApprovalDecision) -> ApprovalRecord:
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
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        return entry

    def read(self) -> list[ApprovalRecord]:
        """All records written so far (for tests and tooling)."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [ApprovalRecord(**json.loads(line)) for line in fh if line.strip()]
