"""Over HTTP the default session (clients that name no session) reaches no other conversation.

Real sandboxed ``ipybox mcp`` processes over Streamable HTTP, driven by raw 2026-07-28 requests. From
the default session's kernel the attacker lists the sessions' root, pre-makes the workspace of a
conversation that has not started yet with a module in it, and swaps a live conversation's workspace
for a third one's. Each attack runs twice: against ipybox as it is (every attempt fails), and as a
control against the layout of before (``old_sessions_layout.py``: the default session's workspace is
``--workspace``, which holds every conversation's workspace; every kernel runs as one sandbox uid),
where each one succeeds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_server_kit import IPYBOX, HttpIpybox, start_http_ipybox

from ipybox_core.sessions._workspaces import legacy_name
from prerequisites import require

OLD_LAYOUT = (sys.executable, str(Path(__file__).with_name("old_sessions_layout.py")))

# Where the attacker looks for the other conversations: the old layout's root inside its own
# workspace, else the directory around its workspace.
FIND_ROOT = """
import json, os
def _root():
    inside = os.path.join(os.getcwd(), '.ipybox-sessions')
    return inside if os.path.isdir(inside) else os.path.dirname(os.getcwd())
def _attempt(fn):
    try:
        return {'ok': True, 'value': fn()}
    except Exception as exc:
        return {'ok': False, 'value': f'{type(exc).__name__}: {exc}'}
"""


class Client:
    """A 2026-07-28 client in raw JSON-RPC; ``session`` is its ``Ipybox-Session`` (None: none)."""

    def __init__(self, server: HttpIpybox, session: str | None) -> None:
        self.server = server
        self.session = session

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        headers = {
            "Authorization": f"Bearer {self.server.token}",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
            "Accept": "application/json, text/event-stream",
            **({"Ipybox-Session": self.session} if self.session is not None else {}),
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        reply = httpx.post(self.server.url, json=body, headers=headers, timeout=180).json()
        assert "result" in reply, reply
        return "\n".join(b["text"] for b in reply["result"].get("content", []) if b.get("type") == "text")

    async def run(self, code: str) -> str:
        return await asyncio.to_thread(self.call, "execute_code", {"code": code})

    async def attempt(self, body: str) -> dict[str, Any]:
        """Run ``def attack(): ...`` (``body``) in the kernel: ``{"ok": ..., "value": ...}``."""
        printed = await self.run(FIND_ROOT + body + "\nprint(json.dumps(_attempt(attack)))")
        result: dict[str, Any] = json.loads(printed.strip().splitlines()[-1])
        return result


def _name(session: str) -> str:
    """The workspace name of ``Ipybox-Session: session`` in the old layout (computable by anyone)."""
    return legacy_name(f"named:{session}")


@pytest.fixture(scope="module", params=["as-is", "old-layout"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    """One server per layout for the module: each attack uses session keys of its own, and none
    depends on what another left (an attacker may find more conversations, never fewer)."""
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    tmp_path = tmp_path_factory.mktemp(str(request.param))
    sandbox = ["--sandbox"]
    program = IPYBOX
    if request.param == "old-layout":  # and the old single sandbox uid, shared by every kernel
        (tmp_path / "sandbox.json").write_text(json.dumps({"sandbox_uids": 1}))
        sandbox, program = ["--sandbox-config", str(tmp_path / "sandbox.json")], OLD_LAYOUT
    started = start_http_ipybox(tmp_path / "ws", *sandbox, "--yes", program=program)
    yield started
    assert started.stop() == 0


def weakened(server: HttpIpybox) -> bool:
    return server.process.args[1] == OLD_LAYOUT[1]  # type: ignore[index]


async def test_the_default_session_cannot_list_the_conversations(server: HttpIpybox) -> None:
    victim = Client(server, "victim-key")
    await victim.run("x = 1")
    listed = await Client(server, None).attempt("def attack():\n    return os.listdir(_root())")
    revealed = listed["ok"] and any("victim" in name for name in listed["value"])
    if weakened(server):
        assert revealed, listed  # control: the key is in the directory names
        return
    assert not revealed, listed
    # what the kernel sees around its workspace is its own directory at most, named by no key
    assert not listed["ok"] or len(listed["value"]) <= 1, listed


async def test_the_default_session_cannot_plant_code_in_a_future_conversation(server: HttpIpybox) -> None:
    plant = (
        "def attack():\n"
        f"    d = os.path.join(_root(), {_name('future')!r})\n"
        "    os.makedirs(d)\n"
        "    with open(os.path.join(d, 'planted.py'), 'w') as f:\n"
        "        f.write('print(\"PLANTED\")')\n"
        "    return d\n"
    )
    planted = await Client(server, None).attempt(plant)
    imported = await Client(server, "future").run("import planted")
    if weakened(server):
        assert planted["ok"], planted
        assert "PLANTED" in imported, imported  # control: the module ran in the new conversation
        return
    assert not planted["ok"], planted
    assert "PLANTED" not in imported and "ModuleNotFoundError" in imported, imported


async def test_the_default_session_cannot_swap_a_live_conversations_workspace(server: HttpIpybox) -> None:
    alice, bob = Client(server, "alice"), Client(server, "bob")
    await alice.run("open('alices.txt', 'w').write('a')")
    await bob.run("open('secret.txt', 'w').write('bob-secret')")
    swap = (
        "def attack():\n"
        f"    a, b = os.path.join(_root(), {_name('alice')!r}), os.path.join(_root(), {_name('bob')!r})\n"
        "    os.rename(a, a + '.moved')\n"
        "    os.rename(b, a)\n"
        "    return 'swapped'\n"
    )
    swapped = await Client(server, None).attempt(swap)
    await asyncio.to_thread(alice.call, "reset", {})  # the next kernel of alice starts in its workspace
    listed = await alice.run("import os\nsorted(os.listdir('.'))")
    read = await alice.run("open('secret.txt').read()")
    if weakened(server):
        assert swapped["ok"], swapped
        assert "bob-secret" in read, read  # control: alice's new kernel reads bob's files
        return
    assert not swapped["ok"], swapped
    assert "bob-secret" not in read and "FileNotFoundError" in read, read
    assert listed == "['alices.txt']", listed  # alice's own workspace, as it was
