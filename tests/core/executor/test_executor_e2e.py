"""CodeExecutor end to end: real kernels, real MCP servers over stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from executor_kit import STDIO_SERVER, executor_on, run

from ipybox_core import (
    ApprovalRequest,
    ApprovalRules,
    CodeExecutor,
    ConfigError,
    ExecutionCancelled,
    ExecutionResult,
    ExecutionTimeout,
    ExecutorBusy,
    KernelDied,
    OutputChunk,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["local", "gateway"])
async def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CodeExecutor]:
    """The same executor cases with a local kernel and with a kernel on a real Jupyter Kernel Gateway."""
    server = {**STDIO_SERVER, "env": {**STDIO_SERVER["env"], "TEST_SECRET": "s3cret-value"}}
    async with executor_on(request, tmp_path_factory, server, timeout=60) as ex:
        yield ex


async def test_approved_calls_return_typed_results(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import add, stats, echo, date_range\n"
        "print(add(a=1, b=2), stats(values=[1, 2, 3]), echo(message='hi'))\n"
        "print(date_range(from_='2024-01-01', to='2024-02-01', class_='week'))\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert [r.name for r in done.requests] == ["test.add", "test.stats", "test.echo", "test.date_range"]
    assert done.requests[3].args == {"from": "2024-01-01", "to": "2024-02-01", "class": "week"}
    assert "3 " in done.text
    assert '"mean": 2.0' in done.text  # a result prints as indented JSON
    assert "hi" in done.text
    assert "2024-02-01" in done.text


async def test_rejection_is_a_permission_error_the_code_can_catch(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import add\n"
        "try:\n"
        "    add(a=1, b=1)\n"
        "except PermissionError as e:\n"
        "    print('rejected:', e)\n"
        "print('after', add(a=20, b=22))\n"
    )

    async def reject_first(request: ApprovalRequest) -> None:
        if request.args == {"a": 1, "b": 1}:
            await request.reject("not allowed today")
        else:
            await request.accept()

    done = await run(executor, code, reject_first)
    assert done.result.error is None
    assert "rejected: test.add was rejected: not allowed today" in done.text
    assert "after 42" in done.text


async def test_uncaught_rejection_shows_a_clean_traceback(executor: CodeExecutor) -> None:
    async def reject(request: ApprovalRequest) -> None:
        await request.reject("no")

    done = await run(executor, "from mcptools.test import add\nadd(a=1, b=2)", reject)
    assert done.result.error is not None
    assert done.result.error.ename == "PermissionError"
    assert "ipybox_core" not in done.result.error.traceback
    assert "add(a=1, b=2)" in done.result.error.traceback


async def test_tool_error_reaches_the_code_as_tool_error(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import fail\n"
        "from ipybox_core.runtime import ToolError\n"
        "try:\n"
        "    fail(kind='tool_error')\n"
        "except ToolError as e:\n"
        "    print('tool error:', e)\n"
    )
    done = await run(executor, code)
    assert "tool error:" in done.text
    assert "the widget is broken" in done.text


async def test_arguments_are_validated_in_the_kernel_before_asking(executor: CodeExecutor) -> None:
    done = await run(executor, "from mcptools.test import add\nadd(a='not a number', b=2)")
    assert done.result.error is not None
    assert done.result.error.ename == "ValidationError"
    assert done.requests == []


async def test_state_persists_and_tools_compose(executor: CodeExecutor) -> None:
    await run(
        executor,
        "from mcptools.test import add\ntotal = 0\nfor i in range(5):\n    total = add(a=total, b=i)",
    )
    done = await run(executor, "print(total * 2)")
    assert done.text.strip() == "20"


async def test_hundred_calls_in_a_loop(executor: CodeExecutor) -> None:
    done = await run(
        executor,
        "from mcptools.test import add\nx = 0\nfor i in range(100):\n    x = add(a=x, b=1)\nprint(x)",
    )
    assert done.text.strip() == "100"
    assert len(done.requests) == 100


async def test_parallel_calls_from_threads_wait_for_approval_together(executor: CodeExecutor) -> None:
    code = (
        "import asyncio\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from mcptools.test import add\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    print(sorted(pool.map(lambda i: add(a=i, b=100), range(4))))\n"
        "print(sorted(await asyncio.gather(*(asyncio.to_thread(add, a=i, b=200) for i in range(3)))))\n"
    )
    seen_pending: list[int] = []
    held: list[ApprovalRequest] = []

    async def hold_until_four(request: ApprovalRequest) -> None:
        held.append(request)
        if len(held) == 4:  # all four thread calls are waiting at the same time
            seen_pending.append(sum(r.pending for r in held))
            for r in held:
                await r.accept()
        elif len(held) > 4:
            await request.accept()

    done = await run(executor, code, hold_until_four)
    assert seen_pending == [4]
    assert "[100, 101, 102, 103]" in done.text
    assert "[200, 201, 202]" in done.text


async def test_time_waiting_for_approval_does_not_count_against_the_timeout(executor: CodeExecutor) -> None:
    # Warm up first: the first call to a fresh stdio server (and the first import of the generated
    # module) can take seconds on a loaded machine, which would count against the budget below.
    warm = await run(executor, "from mcptools.test import add\nprint(add(a=0, b=0))")
    assert warm.text.strip() == "0"

    async def slow_human(request: ApprovalRequest) -> None:
        await asyncio.sleep(3.5)  # well past the 2 s budget: it fires if the wait counts
        await request.accept()

    done = await run(executor, "from mcptools.test import add\nprint(add(a=1, b=1))", slow_human, timeout=2)
    assert done.result.error is None, done.result.error
    assert done.text.strip() == "2"


async def test_timeout_interrupts_code_and_keeps_state(executor: CodeExecutor) -> None:
    await run(executor, "kept = 'yes'")
    with pytest.raises(ExecutionTimeout):
        await run(executor, "while True:\n    pass", timeout=1)
    assert (await run(executor, "print(kept)")).text.strip() == "yes"


async def test_second_stream_while_one_waits_is_refused(executor: CodeExecutor) -> None:
    execution = executor.stream("from mcptools.test import add\nadd(a=1, b=2)")
    request = await anext(execution)
    while not isinstance(request, ApprovalRequest):
        request = await anext(execution)
    with pytest.raises(ExecutorBusy):
        executor.stream("1 + 1")
    await request.accept()
    results = [event async for event in execution if isinstance(event, ExecutionResult)]
    assert results[0].text.strip() == "3"
    assert not executor.busy


async def test_cancel_rejects_pending_approvals_and_interrupts(executor: CodeExecutor) -> None:
    execution = executor.stream("from mcptools.test import add\nadd(a=1, b=2)")
    first = await anext(execution)
    assert isinstance(first, ApprovalRequest)
    await execution.cancel()
    assert not first.pending
    assert first.decision is not None
    assert not first.decision.approved
    with pytest.raises(ExecutionCancelled):
        async for _ in execution:
            pass
    assert (await executor.execute("print('usable')")).text.strip() == "usable"


async def test_output_streams_as_chunks_before_the_result(executor: CodeExecutor) -> None:
    done = await run(
        executor, "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)"
    )
    assert "".join(c.text for c in done.chunks) == "0\n1\n2\n"
    assert all(isinstance(c, OutputChunk) for c in done.chunks)


async def test_mcp_server_secrets_never_reach_the_kernel(executor: CodeExecutor) -> None:
    code = (
        "import os\n"
        "from mcptools.test import env_var\n"
        "print('server sees', env_var(name='TEST_SECRET'))\n"
        "print('kernel sees', os.environ.get('TEST_SECRET'))\n"
        "print('host env leaked', 'PYTEST_CURRENT_TEST' in os.environ)\n"
    )
    done = await run(executor, code)
    assert "server sees s3cret-value" in done.text
    assert "kernel sees None" in done.text
    assert "host env leaked False" in done.text


async def test_wrong_token_is_refused_from_kernel_code(executor: CodeExecutor) -> None:
    code = (
        "import os\n"
        "from mcptools.test import add\n"
        "real = os.environ['IPYBOX_TOOL_TOKEN']\n"
        "os.environ['IPYBOX_TOOL_TOKEN'] = 'forged'\n"
        "try:\n"
        "    add(a=1, b=2)\n"
        "except PermissionError as e:\n"
        "    print('refused:', e)\n"
        "finally:\n"
        "    os.environ['IPYBOX_TOOL_TOKEN'] = real\n"
    )
    done = await run(executor, code)
    assert "refused: the ipybox tool server refused the call: invalid token" in done.text
    assert done.requests == []


async def test_images_from_tools_and_plots(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import image\n"
        "img = image(width=2, height=2, colour='blue')\n"
        "print(img, len(img.images))\n"
        "display(img)\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
    )
    done = await run(executor, code)
    assert "blue 2x2 1" in done.text
    assert len(done.result.images) == 2
    assert all(image.startswith(b"\x89PNG") for image in done.result.images)


async def test_execute_accepts_requests_only_when_told_to(executor: CodeExecutor) -> None:
    code = "from mcptools.test import add\nexecute_runs = globals().get('execute_runs', 0) + 1\nadd(a=2, b=3)"
    with pytest.raises(ConfigError, match=r"'test.add' needs a decision.*approve_all=True"):
        await executor.execute(code)
    assert not executor.busy
    assert (await executor.execute("print(execute_runs)")).text.strip() == "1"  # no tool call: no decision
    result = await executor.execute(code, approve_all=True)
    assert result.text.strip() == "5"


async def test_api_reference_lists_the_tools(executor: CodeExecutor) -> None:
    reference = executor.api_reference()
    assert "from mcptools.test import" in reference
    assert "def add(*, a: int, b: int) -> int" in reference


async def test_shell_commands_need_approval_when_enabled(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, approve_shell=True) as ex:

        async def allow_echo(request: ApprovalRequest) -> None:
            if "echo" in request.args["command"]:
                await request.accept()
            else:
                await request.reject("no deleting")

        done = await run(ex, "!echo hello-$((1+2))\n!rm -rf /nonexistent", allow_echo)
        assert [(r.kind, r.args["command"]) for r in done.requests] == [
            ("shell", "echo hello-$((1+2))"),
            ("shell", "rm -rf /nonexistent"),
        ]
        assert "hello-3" in done.text
        assert done.result.error is not None
        assert done.result.error.ename == "PermissionError"
        assert "no deleting" in done.result.error.evalue


async def test_rules_and_audit_log(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rules = ApprovalRules(allow=["test.add"], deny=["test.die"], allow_read_only=True)
    async with CodeExecutor(workspace=tmp_path / "ws", approval=rules, audit_log=audit) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        code = (
            "from mcptools.test import add, stats, die, echo\n"
            "print(add(a=1, b=1), stats(values=[1.0]).count)\n"
            "try:\n    die()\nexcept PermissionError as e:\n    print('denied:', e)\n"
            "print(echo(message='asked'))\n"
        )
        done = await run(ex, code)
        assert [r.name for r in done.requests] == ["test.echo"]  # only the unmatched tool was asked
        assert "denied: test.die was rejected: denied by policy:deny test.die" in done.text
        assert "asked" in done.text
    lines = audit.read_text().splitlines()
    assert len(lines) == 4
    assert '"decided_by": "policy:allow test.add"' in lines[0]
    assert '"decided_by": "policy:read-only"' in lines[1]


async def test_approval_timeout_rejects_with_a_reason(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, approval_timeout=0.5) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)

        async def ignore(request: ApprovalRequest) -> None:
            pass

        done = await run(
            ex,
            "from mcptools.test import add\ntry:\n    add(a=1, b=1)\nexcept PermissionError as e:\n    print(e)",
            ignore,
        )
        assert "approval timed out after 0.5 s" in done.text


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_http_and_sse_servers(
    transport: str, tmp_path: Path, http_server_url: str, sse_server_url: str
) -> None:
    config: dict[str, Any] = {"url": http_server_url} if transport == "http" else {"url": sse_server_url}
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        await ex.register_mcp_server("remote", config)
        result = await ex.execute(
            "from mcptools.remote import add, create_order\n"
            "o = create_order(customer={'name': 'Ada', 'address': {'street': 'x', 'city': 'Paris'}},"
            " items=[{'sku': 'a', 'qty': 2, 'unit_price': 1.5}], priority='high')\n"
            "print(add(a=40, b=2), o.city, o.total, o.priority)"
        )
        assert result.error is None, result.error
        assert result.text.strip() == "42 Paris 3.0 high"  # enums are generated as Literal strings


async def test_mcp_server_killed_mid_call_gives_a_clean_error_and_reconnects(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        code = (
            "from mcptools.test import die, count\n"
            "from ipybox_core.runtime import McpServerError\n"
            "print(count())\n"
            "try:\n    die()\nexcept McpServerError as e:\n    print('lost:', type(e).__name__)\n"
        )
        result = await ex.execute(code)
        assert result.error is None, result.error
        assert "lost: McpServerError" in result.text
        again = await ex.execute("print(count())")
        # a fresh server process: the counter started over, and the code is told so on stderr
        assert again.text.splitlines()[0] == "1"
        assert "ipybox: MCP server 'test' had stopped" in again.text and "was restarted" in again.text


async def test_kernel_killed_while_a_call_waits_for_approval(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        execution = ex.stream("import os\nfrom mcptools.test import add\nx = 1\nadd(a=1, b=2)")
        request = await anext(execution)
        assert isinstance(request, ApprovalRequest)
        pid = ex._kernel.pid  # type: ignore[union-attr]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(KernelDied):
            async for _ in execution:
                pass
        for _ in range(100):
            if not request.pending:
                break
            await asyncio.sleep(0.05)
        assert not request.pending
        assert not ex.busy
        result = await ex.execute(
            "from mcptools.test import add\nprint('x' in dir(), add(a=2, b=2))", approve_all=True
        )
        assert result.text.strip() == "False 4"


async def test_reset_gives_fresh_state_and_keeps_the_api(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        await ex.execute("from mcptools.test import count\nsecret = 1\nprint(count(), count())")
        await ex.reset()
        result = await ex.execute("from mcptools.test import count\nprint('secret' in dir(), count())")
        assert result.text.strip() == "False 1"  # fresh kernel; MCP server restarted lazily


async def test_registering_later_is_importable_at_once_and_replacement_is_picked_up(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        result = await ex.execute("import importlib.util\nprint(importlib.util.find_spec('mcptools'))")
        assert result.text.strip() == "None"
        await ex.register_mcp_server("test", STDIO_SERVER)
        assert (await ex.execute("from mcptools.test import add\nprint(add(a=1, b=1))")).text.strip() == "2"
        await ex.register_mcp_server(
            "test", {"command": STDIO_SERVER["command"], "args": ["-m", "ipybox_core.demo.server"]}
        )
        result = await ex.execute(
            "import mcptools.test as t\nprint(hasattr(t, 'add'), hasattr(t, 'list_products'))"
        )
        assert result.text.strip() == "False True"
        await ex.unregister_mcp_server("test")
        result = await ex.execute(
            "try:\n    import mcptools.test\nexcept ImportError as e:\n    print('gone')"
        )
        assert result.text.strip() == "gone"


async def test_many_executors_in_one_process_are_independent(tmp_path: Path) -> None:
    async def one(i: int) -> tuple[str, str]:
        async with CodeExecutor(workspace=tmp_path / f"ws{i}") as ex:
            await ex.execute(f"me = {i}")
            result = await ex.execute("import os\nprint(me, os.environ['IPYBOX_TOOL_SERVER'])")
            assert ex._toolserver is not None
            return result.text.split()[0], ex._toolserver.token

    outcomes = await asyncio.gather(*(one(i) for i in range(3)))
    assert [o[0] for o in outcomes] == ["0", "1", "2"]
    assert len({o[1] for o in outcomes}) == 3


async def test_closed_executor_leaves_no_process(tmp_path: Path) -> None:
    from servers.processes import descendant_pids

    before = set(descendant_pids(os.getpid()))
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        await ex.execute("from mcptools.test import add\nadd(a=1, b=1)\n!sleep 60 &")
        assert len(set(descendant_pids(os.getpid())) - before) >= 2
    for _ in range(50):
        if not set(descendant_pids(os.getpid())) - before:
            break
        await asyncio.sleep(0.1)
    assert set(descendant_pids(os.getpid())) - before == set()


async def test_use_after_close_is_a_clear_error(tmp_path: Path) -> None:
    from ipybox_core import ExecutorClosed

    ex = CodeExecutor(workspace=tmp_path)
    async with ex:
        pass
    with pytest.raises(ExecutorClosed):
        ex.stream("1")


async def test_tracebacks_hide_generated_wrapper_frames(executor: CodeExecutor) -> None:
    result = await executor.execute(
        "from mcptools.test import fail\nfail(kind='tool_error')", approve_all=True
    )
    assert result.error is not None
    assert result.error.ename == "ToolError"
    assert "fail(kind='tool_error')" in result.error.traceback
    assert "_tools" not in result.error.traceback
    assert "mcptools/test" not in result.error.traceback


async def test_output_printed_before_a_call_arrives_before_its_approval_request(
    executor: CodeExecutor,
) -> None:
    code = "from mcptools.test import add\nfor i in range(15):\n    print(f'before-{i}')\n    add(a=i, b=0)\n"
    order: list[str] = []
    async with executor.stream(code) as execution:
        async for event in execution:
            if isinstance(event, OutputChunk):
                order.extend(line for line in event.text.splitlines() if line)
            elif isinstance(event, ApprovalRequest):
                order.append(f"request-{event.args['a']}")
                await asyncio.sleep(0.03)  # a busy application (e.g. a framework turn)
                await event.accept()
    expected = [item for i in range(15) for item in (f"before-{i}", f"request-{i}")]
    assert order == expected


async def test_api_dir_outside_the_workspace(tmp_path: Path) -> None:
    api_dir = tmp_path / "state" / "tools"
    async with CodeExecutor(workspace=tmp_path / "project", api_dir=api_dir, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        assert "from tools.test import" in ex.api_reference()
        result = await ex.execute("from tools.test import add\nprint(add(a=1, b=2))")
        assert result.text.strip() == "3"
    assert (api_dir / "test" / "__init__.py").exists()
    assert not (tmp_path / "project" / "mcptools").exists()


async def test_wall_timeout_ends_an_execution_whose_approval_nobody_answers(executor: CodeExecutor) -> None:
    """The execution timeout pauses while a decision is pending; ``wall_timeout`` never pauses."""
    code = "from mcptools.test import add\nadd(a=1, b=2)"
    ignored: list[ApprovalRequest] = []

    async def drain(execution: Any) -> ExecutionResult | BaseException:
        try:
            async for event in execution:
                if isinstance(event, ApprovalRequest):
                    ignored.append(event)  # nobody answers
                elif isinstance(event, ExecutionResult):
                    return event
        except Exception as exc:
            return exc
        raise AssertionError("no result")

    await executor.execute("from mcptools.test import add")  # the timed cells only make the call
    # control: with only the (pausing) timeout the execution is still waiting well past it
    paused = asyncio.ensure_future(drain(executor.stream(code, timeout=1.0)))
    async with asyncio.timeout(60):  # the approval itself, however slow the kernel is to get there
        while not ignored and not paused.done():
            await asyncio.sleep(0.05)
    await asyncio.sleep(3.0)  # three times the pausing timeout, counted from the approval
    assert not paused.done() and ignored and ignored[0].pending
    await executor.cancel()
    await paused

    ignored.clear()
    # the pausing timeout is far off (a loaded machine may take long to reach the call); only the
    # wall-clock limit, which never pauses, can end this one
    outcome = await asyncio.wait_for(drain(executor.stream(code, timeout=60, wall_timeout=1.0)), 30)
    assert isinstance(outcome, ExecutionTimeout), outcome
    assert "1 s wall-clock limit" in str(outcome)
    assert ignored and not ignored[0].pending
    assert not executor.busy
    assert (await executor.execute("print('usable')")).text.strip() == "usable"


async def test_a_decided_call_reports_what_it_came_to(executor: CodeExecutor) -> None:
    """``ApprovalRequest.outcome()``: the MCP result of an approved call, the error of a failed one,
    the refusal of a rejected one (what adapters show in traces and events)."""
    code = (
        "from mcptools.test import add, fail\n"
        "print(add(a=2, b=3))\n"
        "try:\n    fail()\nexcept Exception as error:\n    print(type(error).__name__)\n"
        "try:\n    add(a=0, b=0)\nexcept PermissionError:\n    print('refused')\n"
    )
    outcomes = []
    async for event in executor.stream(code):
        if isinstance(event, ApprovalRequest):
            if event.args == {"a": 0, "b": 0}:
                await event.reject("not zero")
            else:
                await event.accept()
            outcomes.append(await event.outcome())
        elif isinstance(event, ExecutionResult):
            assert event.text.split() == ["5", "ToolError", "refused"], event.text
    added, failed, refused = outcomes
    assert added is not None and (added.ok, added.structured, added.error) == (True, {"result": 5}, None)
    assert failed is not None and (failed.ok, failed.error) == (False, "tool_error")
    assert refused is not None and (refused.ok, refused.error) == (False, "rejected")
    assert "not zero" in refused.text
