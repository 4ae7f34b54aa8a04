"""Sessions over the other backends: sandboxed kernels (bubblewrap) and a real Jupyter Kernel Gateway."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from core.executor.executor_kit import STDIO_SERVER
from ipybox_core import SandboxUnavailable, Sessions
from ipybox_core.sandbox import probe_sandbox
from prerequisites import require


def require_bwrap() -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    try:
        probe_sandbox()
    except SandboxUnavailable as exc:
        require(False, f"bubblewrap cannot run here: {exc}")


async def test_sandboxed_sessions_see_their_own_workspace_and_a_read_only_api(tmp_path: Path) -> None:
    require_bwrap()
    async with Sessions(
        root=tmp_path / "root", warm=2, sandbox=True, approval="never", mcp_servers={"test": STDIO_SERVER}
    ) as sessions:
        alice = await sessions.session("alice")
        bob = await sessions.session("bob")
        (bob.workspace / "bobs.txt").write_text("private")
        code = (
            "import os, mcptools\n"
            "from mcptools.test import add\n"
            "print(os.environ.get('IPYBOX_SANDBOX'), add(a=2, b=3))\n"
            "open('alices.txt', 'w').write('a')\n"
            f"print(os.path.exists({str(bob.workspace / 'bobs.txt')!r}))\n"
            "try:\n"
            "    open(os.path.join(os.path.dirname(mcptools.__file__), 'planted.py'), 'w')\n"
            "    print('api writable')\n"
            "except OSError:\n"
            "    print('api read-only')\n"
        )
        done = await alice.executor.execute(code)
        assert done.error is None, done.error
        assert done.text.split("\n")[:3] == ["bwrap 5", "False", "api read-only"], done.text
        assert (alice.workspace / "alices.txt").exists()
        # A restarted sandboxed kernel starts in the session's (renamed) directory.
        await alice.executor.reset()
        again = await alice.executor.execute("import os\nprint(sorted(os.listdir('.')))")
        assert again.text.strip() == "['alices.txt']", again.text


@pytest.fixture(params=["local", "gateway"])
def backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "gateway":
        gateway = request.getfixturevalue("kernel_gateway")
        return {"kernel_gateway": gateway.url, "gateway_token": gateway.token}
    return {}


async def test_acquire_and_execute_on_each_backend(tmp_path: Path, backend: dict[str, Any]) -> None:
    async with Sessions(
        root=tmp_path, warm=1, approval="never", mcp_servers={"test": STDIO_SERVER}, timeout=60, **backend
    ) as sessions:
        one = await sessions.session("one")
        two = await sessions.session("two")  # from the pool, or started on demand
        for session, value in ((one, 1), (two, 2)):
            await session.executor.execute(f"value = {value}")
        for session, value in ((one, 1), (two, 2)):
            done = await session.executor.execute("from mcptools.test import add\nprint(add(a=value, b=10))")
            assert done.error is None, done.error
            assert done.text.strip() == str(value + 10)
        await sessions.close_session("one")
        again = await sessions.session("one")
        assert again.take_restart_notice() is not None
        done = await again.executor.execute("from mcptools.test import add\nprint(add(a=5, b=5))")
        assert done.text.strip() == "10", done.text
