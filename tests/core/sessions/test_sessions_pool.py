"""Sessions: one executor per key from a template, with real kernels and the real test MCP server.

Isolation (variables, files, approvals), the warm pool, idle reaping with a one-time restart
notice, the live limit, shared and per-session MCP connections, and clean closing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from core.executor.executor_kit import STDIO_SERVER, run
from core.sessions.sessions_kit import eventually, kernel_pids, server_pids
from ipybox_core import ApprovalRequest, ConfigError, ExecutionResult, SessionLimitError, Sessions


async def _until_request(execution: Any) -> ApprovalRequest:
    event = await execution.next_stop()
    assert isinstance(event, ApprovalRequest), event
    return event


async def test_two_sessions_are_isolated_and_share_one_mcp_server(tmp_path: Path) -> None:
    before = server_pids()
    async with Sessions(root=tmp_path / "root", mcp_servers={"test": STDIO_SERVER}, warm=2) as sessions:
        alice = await sessions.session("alice")
        bob = await sessions.session("bob")
        assert alice.executor is not bob.executor
        assert alice.workspace != bob.workspace
        assert alice.workspace.parent == bob.workspace.parent == (tmp_path / "root").absolute()
        assert (await sessions.session("alice")) is alice

        await alice.executor.execute("secret = 'alice-only'\nopen('mine.txt', 'w').write('a')")
        seen = await bob.executor.execute(
            "import os\nprint(globals().get('secret'), os.path.exists('mine.txt'), os.listdir('.'))"
        )
        assert seen.text.strip() == "None False []", seen.text
        assert (alice.workspace / "mine.txt").read_text() == "a"

        # Alice's call waits for a decision; Bob's own call is asked of Bob alone, and Alice's
        # request is not among Bob's events.
        pending = alice.executor.stream("from mcptools.test import whoami\nprint('alice', whoami()['pid'])")
        alice_request = await _until_request(pending)
        bob_run = await run(bob.executor, "from mcptools.test import whoami\nprint('bob', whoami()['pid'])")
        assert [r.id for r in bob_run.requests] != [alice_request.id]
        assert [r.name for r in bob_run.requests] == ["test.whoami"]
        assert alice_request.pending
        assert alice.executor.busy
        assert not bob.executor.busy
        await alice_request.accept()
        result = await pending.next_stop()
        assert isinstance(result, ExecutionResult), result

        alice_pid = int(result.text.split()[-1])
        bob_pid = int(bob_run.text.split()[-1])
        # One server process serves both sessions (connections are shared by default).
        assert alice_pid == bob_pid
        assert server_pids() - before == {alice_pid}
        assert "def whoami" in sessions.api_reference()
        assert sessions.live == 2
        assert sorted(sessions.keys()) == ["alice", "bob"]
    assert server_pids() - before == set()
    assert (alice.workspace / "mine.txt").exists()  # a given root is kept


async def test_warm_acquire_hands_out_a_started_executor_and_refills(tmp_path: Path) -> None:
    root = tmp_path / "root"
    async with Sessions(root=root, warm=1, approval="never") as sessions:
        [warm_dir] = root.glob(".warm-*")
        warm_inode = warm_dir.stat().st_ino
        kernels_before = kernel_pids()
        session = await sessions.session("conversation 1")
        # The session is the warm executor: its directory renamed, its kernel already running.
        assert session.workspace.parent == root.absolute()
        assert "conversation" not in session.workspace.name  # the name does not reveal the key
        assert session.workspace.stat().st_ino == warm_inode
        assert not warm_dir.exists()
        pid = await session.executor.execute("import os\nprint(os.getpid())")
        assert int(pid.text) in kernels_before or any(
            int(pid.text) in {c.pid for c in _descendants(k)} for k in kernels_before
        )
        # The kernel works in the renamed directory, also after a restart.
        await session.executor.execute("open('f.txt', 'w').write('x')")
        assert (session.workspace / "f.txt").exists()
        await session.executor.reset()
        listed = await session.executor.execute("import os\nprint(os.listdir('.'))")
        assert listed.text.strip() == "['f.txt']", listed.text
        # A replacement is started in the background.
        await eventually(lambda: len(list(root.glob(".warm-*"))) == 1, "the warm pool refilled")
        await eventually(lambda: len(sessions._ready) == 1, "the replacement started")
    assert not list(root.glob(".warm-*"))


def _descendants(pid: int) -> list[Any]:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


async def test_idle_session_is_closed_and_the_next_one_says_so_once(tmp_path: Path) -> None:
    async with Sessions(
        root=tmp_path, warm=1, idle_timeout=0.5, mcp_servers={"test": STDIO_SERVER}
    ) as sessions:
        session = await sessions.session("k")
        assert session.take_restart_notice() is None
        # Running longer than the idle timeout, and waiting for approval, is use, not idleness.
        await session.executor.execute("import time\ntime.sleep(1.2)\nx = 41")
        assert sessions.keys() == ["k"]
        waiting = session.executor.stream("from mcptools.test import add\nprint(add(a=x, b=1))")
        request = await _until_request(waiting)
        await asyncio.sleep(1.2)
        assert sessions.keys() == ["k"]
        await request.accept()
        done = await waiting.next_stop()
        assert isinstance(done, ExecutionResult)
        assert done.text.strip() == "42"
        await session.executor.execute("open('kept.txt', 'w').write('kept')")
        kernel = await session.executor.execute("import os\nprint(os.getpid())")

        await eventually(lambda: sessions.live == 0, "the idle session was closed")
        await eventually(lambda: int(kernel.text) not in kernel_pids(), "its kernel stopped")
        assert (session.workspace / "kept.txt").read_text() == "kept"

        again = await sessions.session("k")
        assert again is not session
        notice = again.take_restart_notice()
        assert notice is not None
        assert "restarted" in notice
        assert "0.5 s idle" in notice
        assert "files in the workspace remain" in notice
        assert again.take_restart_notice() is None
        state = await again.executor.execute("import os\nprint('x' in globals(), os.listdir('.'))")
        assert state.text.strip() == "False ['kept.txt']", state.text
        assert again.workspace == session.workspace
        other = await sessions.session("never-closed")
        assert other.take_restart_notice() is None


async def test_a_held_session_outlives_the_idle_timeout_and_its_end_counts_as_use(tmp_path: Path) -> None:
    async with Sessions(root=tmp_path, warm=0, idle_timeout=0.3) as sessions:
        held = await sessions.session("held")
        with held.hold():  # e.g. an MCP server being registered in it: not busy, but in use
            control = await sessions.session("control")
            await eventually(lambda: sessions.keys() == ["held"], "the idle control session was closed")
            assert held.in_use and not held.executor.busy
        assert sessions.keys() == ["held"]  # the hold's end counts as a use: not closed at once
        assert (await held.executor.execute("1 + 1")).text.strip() == "2"
        await eventually(lambda: sessions.live == 0, "the session was closed once idle")
        assert control.take_restart_notice() is None


async def test_max_sessions_evicts_the_longest_idle_then_refuses(tmp_path: Path) -> None:
    async with Sessions(
        root=tmp_path, warm=0, max_sessions=2, mcp_servers={"test": STDIO_SERVER}
    ) as sessions:
        a = await sessions.session("a")
        b = await sessions.session("b")
        await b.executor.execute("1")
        await a.executor.execute("1")  # b is now the longest idle
        c = await sessions.session("c")
        assert sorted(sessions.keys()) == ["a", "c"]
        b2 = await sessions.session("b")  # evicts a (idle longer than c)
        assert sorted(sessions.keys()) == ["b", "c"]
        notice = b2.take_restart_notice()
        assert notice is not None
        assert "make room" in notice

        # Both live sessions wait for approval: nothing can be evicted.
        first = b2.executor.stream("from mcptools.test import add\nadd(a=1, b=1)")
        second = c.executor.stream("from mcptools.test import add\nadd(a=1, b=1)")
        await _until_request(first)
        await _until_request(second)
        with pytest.raises(SessionLimitError) as refused:
            await sessions.session("d")
        message = str(refused.value)
        assert "max_sessions" in message
        assert "idle_timeout" in message
        assert sorted(sessions.keys()) == ["b", "c"]
        await first.cancel()
        await second.cancel()
        d = await sessions.session("d")
        assert d.take_restart_notice() is None
        assert sessions.live == 2


async def test_close_session_gives_a_notice_and_aclose_leaves_nothing(tmp_path: Path) -> None:
    kernels, servers = kernel_pids(), server_pids()
    sessions = Sessions(warm=1, mcp_servers={"test": STDIO_SERVER})
    await sessions.start()
    session = await sessions.session("k")
    root = session.workspace.parent
    await sessions.close_session("k")
    await sessions.close_session("unknown")  # nothing to close
    assert sessions.live == 0
    notice = (await sessions.session("k")).take_restart_notice()
    assert notice is not None
    assert "closed by the application" in notice
    await sessions.session("other")
    assert kernel_pids() - kernels
    await sessions.aclose()
    assert kernel_pids() - kernels == set()
    assert server_pids() - servers == set()
    assert not root.exists()  # the private default root is removed
    with pytest.raises(RuntimeError):
        await sessions.session("k")


async def test_the_template_cannot_name_a_workspace_and_sessions_cannot_register(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workspace"):
        Sessions(workspace=tmp_path)
    with pytest.raises(ConfigError, match="aproval"):
        Sessions(aproval="never")  # type: ignore[call-arg]  # mypy sees it too
    async with Sessions(root=tmp_path, warm=0) as sessions:
        session = await sessions.session("k")
        with pytest.raises(ConfigError, match="Sessions template"):
            await session.executor.register_mcp_server("test", STDIO_SERVER)


async def test_placeholder_servers_connect_per_session_with_the_session_env(tmp_path: Path) -> None:
    personal = {**STDIO_SERVER, "env": {**STDIO_SERVER["env"], "USER_TOKEN": "${USER_TOKEN}"}}
    before = server_pids()
    os.environ.pop("USER_TOKEN", None)
    async with Sessions(
        root=tmp_path,
        warm=1,
        approval="never",
        mcp_servers={"shared": STDIO_SERVER, "personal": personal},
        session_env=lambda key: {"USER_TOKEN": f"token-of-{key}"},
    ) as sessions:
        code = (
            "from mcptools.personal import env_var, whoami\n"
            "from mcptools.shared import whoami as shared_whoami\n"
            "print(env_var(name='USER_TOKEN'), whoami()['pid'], shared_whoami()['pid'])"
        )
        seen = {}
        for key in ("ann", "ben"):
            session = await sessions.session(key)
            token, pid, shared_pid = (await session.executor.execute(code)).text.split()
            seen[key] = (token, int(pid), int(shared_pid))
        assert seen["ann"][0] == "token-of-ann"
        assert seen["ben"][0] == "token-of-ben"
        assert seen["ann"][1] != seen["ben"][1]  # a connection each
        assert seen["ann"][2] == seen["ben"][2]  # one shared
        assert server_pids() - before == {seen["ann"][1], seen["ben"][1], seen["ann"][2]}
        assert "personal" in sessions.api_reference()
        await sessions.close_session("ann")
        await eventually(lambda: seen["ann"][1] not in server_pids(), "ann's own server stopped")
        assert seen["ben"][1] in server_pids()
    assert server_pids() - before == set()


async def test_a_conversation_back_after_a_restart_is_told_its_kernel_is_new(tmp_path: Path) -> None:
    """A kept root outlives the process (an application or ``ipybox serve`` restarted): a key whose
    workspace an earlier process left gets a fresh kernel and the notice, once; a new key none."""
    async with Sessions(root=tmp_path, warm=0) as first:
        await (await first.session("k")).executor.execute("x = 1\nopen('kept.txt', 'w').write('kept')")
    async with Sessions(root=tmp_path, warm=0) as second:
        again = await second.session("k")
        notice = again.take_restart_notice()
        assert (
            notice is not None and "restarted since" in notice and "files in the workspace remain" in notice
        )
        state = await again.executor.execute("import os\nprint('x' in globals(), os.listdir('.'))")
        assert state.text.strip() == "False ['kept.txt']"
        assert (await second.session("new")).take_restart_notice() is None
        await second.close_session("k")
        assert "restarted since" not in ((await second.session("k")).take_restart_notice() or "")
