"""One executor seam: both executors implement the protocol the adapters type against, and the
adapters never ask which executor they have."""

from __future__ import annotations

import ast
from pathlib import Path

from ipybox_core import CodeExecutor, Sessions
from ipybox_core.executor import Executor, SessionSource
from ipybox_core.executor._conversation import ConversationExecutor
from ipybox_core.remote import RemoteExecutor, RemoteSessions

INTEGRATIONS = Path(__file__).parents[2] / "src" / "ipybox_integrations"
CONCRETE = {"CodeExecutor", "RemoteExecutor", "RemoteSessions", "ConversationExecutor"}


def test_every_executor_and_session_source_implements_the_protocols() -> None:
    for executor in (CodeExecutor, RemoteExecutor, ConversationExecutor):
        missing = [name for name in _members(Executor) if not hasattr(executor, name)]
        assert not missing, (executor.__name__, missing)
    for source in (CodeExecutor, Sessions, RemoteSessions):
        missing = [name for name in _members(SessionSource) if not hasattr(source, name)]
        assert not missing, (source.__name__, missing)


def test_the_adapters_never_branch_on_a_concrete_executor() -> None:
    offenders = []
    for path in INTEGRATIONS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "ipybox_core.remote",
                "ipybox_core.mcp_server._suspended",
            ):
                offenders += [f"{path.name}: imports {a.name}" for a in node.names if a.name in CONCRETE]
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                offenders += [f"{path.name}:{node.lineno}: isinstance on {n}" for n in names & CONCRETE]
    assert not offenders


def _members(protocol: type) -> list[str]:
    return [name for name in vars(protocol) if not name.startswith("_")]
