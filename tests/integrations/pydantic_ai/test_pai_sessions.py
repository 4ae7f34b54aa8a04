"""CodeAction over ipybox_core Sessions: one kernel per conversation (real kernels, the test server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pai_kit import ScriptedModel, returns_of, text_of
from pydantic_ai import Agent, DeferredToolRequests

from ipybox_core.sessions import Sessions
from ipybox_integrations.pydantic_ai import CodeAction
from servers import PYTHON, SERVE_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")

SERVERS = {"test": {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}}


async def test_two_conversations_in_parallel_have_their_own_kernels(tmp_path: Path) -> None:
    async with Sessions(root=tmp_path, warm=0, mcp_servers=SERVERS) as sessions:
        code_action = CodeAction(sessions)

        async def conversation(name: str) -> str:
            model = ScriptedModel([f"mine = {name!r}", "print(globals().get('mine'))"])
            agent = Agent(model.model, capabilities=[code_action], output_type=[str, DeferredToolRequests])
            result = await agent.run("go", conversation_id=name)
            return text_of(returns_of(result)[-1])

        assert list(await asyncio.gather(conversation("alice"), conversation("bob"))) == ["alice", "bob"]
        assert sorted(sessions.keys()) == ["alice", "bob"]
