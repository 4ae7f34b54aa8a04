"""Why a call no longer waits: the causes of the executions that ended without being answered.

An execution started with a call id that ends while (or after) it waited for a decision leaves its
cause here, so that a later :meth:`~ipybox_core.executor.CodeExecutor.reattach` that finds nothing
can say why (:meth:`~ipybox_core.executor.CodeExecutor.ended`) instead of listing every possible
cause. The newest ``limit`` calls are kept; the service keeps its record in a file across a
graceful restart (:meth:`EndedCalls.load`, :meth:`EndedCalls.save`).
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from pathlib import Path

from ipybox_core import protocol
from ipybox_core._safe_fs import SafeDir, anchored
from ipybox_core.errors import ExecutionGone, IpyboxError

ENDED_CALLS_LIMIT = 4096
"""How many ended calls a record keeps (the oldest go first)."""
_FILE_LIMIT = 16 * 1024 * 1024  # bytes of a saved record read back


class EndedCalls:
    """Call id → why its execution ended without anyone answering it (the newest ``limit``)."""

    def __init__(self, limit: int = ENDED_CALLS_LIMIT) -> None:
        self.limit = limit
        self._causes: OrderedDict[str, dict[str, object]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._causes)

    def record(self, call_id: str, error: BaseException) -> None:
        """``call_id`` ended as ``error`` (kept as :func:`protocol.gone_because` words it)."""
        self._causes.pop(call_id, None)
        self._causes[call_id] = protocol.encode_error(protocol.gone_because(error))
        while len(self._causes) > self.limit:
            self._causes.popitem(last=False)

    def get(self, call_id: str) -> ExecutionGone | None:
        """Why ``call_id`` no longer waits, if it is recorded."""
        data = self._causes.get(call_id)
        if data is None:
            return None
        error = protocol.decode_error(data)
        return error if isinstance(error, ExecutionGone) else None

    def forget(self, call_id: str) -> None:
        """``call_id`` waits again (a new execution under the same id)."""
        self._causes.pop(call_id, None)

    def save(self, directory: Path, name: str, *, keys: list[str] | None = None) -> None:
        """Write the record (and ``keys``, e.g. the conversations that had a kernel) to
        ``directory/name``, atomically; nothing in ``directory`` is followed."""
        data = json.dumps({"ended": list(self._causes.items()), "keys": keys or []}).encode()
        with SafeDir.open(anchored(directory, directory.parent)) as where:
            where.replace(name, data, 0o600)

    def load(self, directory: Path, name: str) -> list[str]:
        """Add what :meth:`save` wrote to ``directory/name`` and return its ``keys`` (nothing when
        the file is missing or unreadable)."""
        keys: list[str] = []
        with contextlib.suppress(OSError, IpyboxError, ValueError, TypeError, KeyError):
            with SafeDir.open(anchored(directory, directory.parent)) as where:
                saved = json.loads(where.read_bytes(name, limit=_FILE_LIMIT))
            for call_id, data in saved["ended"]:
                if isinstance(call_id, str) and isinstance(data, dict):
                    self._causes[call_id] = data
            while len(self._causes) > self.limit:
                self._causes.popitem(last=False)
            keys = [key for key in saved.get("keys") or () if isinstance(key, str)][: self.limit]
        return keys
