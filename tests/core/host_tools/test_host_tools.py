"""Host tools (issue 24): the application's own async functions, called from kernel code like MCP
tools. Real kernels and the real tool server; each call passes the approval gate as a call of the
server ``agent_tools``."""

from __future__ import annotations

import asyncio
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from example_runner import run_example
from ipybox_core import ApprovalRequest, ApprovalRules, CodeExecutor, ConfigError
from ipybox_core.codegen import CodegenWarning
from ipybox_core.executor import ExecutionResult
from ipybox_core.hosttools import HOST_SERVER, HostCall, HostTool
from prerequisites import require
from servers import PYTHON, SERVE_SCRIPT

STDIO_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}
ORDER_ARGS = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


class Order(BaseModel):
    id: str
    total: float
    tags: list[str]


async def run_alone(workspace: Path, tools: list[HostTool], code: str) -> ExecutionResult:
    """``code`` in a fresh executor with ``tools`` whose calls need no decision."""
    async with CodeExecutor(workspace=workspace, host_tools=tools, approval="never") as ex:
        return await ex.execute(code)


def order_tools(calls: list[HostCall]) -> list[HostTool]:
    async def get_order(call: HostCall) -> Order:
        calls.append(call)
        return Order(id=call.arguments["order"], total=12.5, tags=["new"])

    async def whoami(call: HostCall) -> dict[str, Any]:
        calls.append(call)
        return {"user": call.context, "orders": [1, 2]}

    async def note(call: HostCall) -> str:
        calls.append(call)
        return f"noted {call.arguments['order']}"

    async def fail(call: HostCall) -> None:
        calls.append(call)
        raise ValueError(f"order {call.arguments['order']} is locked")

    async def list_orders(call: HostCall) -> list[Order]:
        calls.append(call)
        return [Order(id="A-1", total=1.0, tags=[]), Order(id="A-2", total=2.0, tags=["x"])]

    async def hang(call: HostCall) -> None:
        calls.append(call)
        await asyncio.sleep(60)

    return [
        HostTool(
            "get_order", get_order, "Fetch one order.", ORDER_ARGS, Order.model_json_schema(), read_only=True
        ),
        HostTool("whoami", whoami, "The signed-in user."),
        HostTool("note", note, "Write a note.", ORDER_ARGS, {"type": "string"}),
        HostTool("fail", fail, "Always fails.", ORDER_ARGS),
        HostTool("hang", hang, "Never answers.", timeout=0.5),
        HostTool(
            "list_orders", list_orders, "All orders.", output_schema=TypeAdapter(list[Order]).json_schema()
        ),
    ]


async def test_typed_calls_keep_structure_and_get_the_bound_context(tmp_path: Path) -> None:
    calls: list[HostCall] = []
    async with CodeExecutor(workspace=tmp_path, host_tools=order_tools(calls), approval="never") as ex:
        ex.bind_tool_context("carol")
        first = await ex.execute(
            "from agent_tools import get_order, whoami, note\n"
            "order = get_order(order='A-1')\n"
            "print(type(order).__name__, order.id, order.total, order.tags)\n"
            "me = whoami()\nprint(type(me).__name__, me)\n"
            "print(repr(note(order='A-1')))\n"
            "from agent_tools import list_orders\n"
            "print([(type(o).__name__, o.id) for o in list_orders()])\n"
        )
        ex.bind_tool_context("dave")
        second = await ex.execute("print(whoami()['user'])")
    assert first.error is None, first.error
    assert first.text.splitlines() == [
        "Order A-1 12.5 ['new']",
        "dict {'user': 'carol', 'orders': [1, 2]}",
        "'noted A-1'",
        "[('Order', 'A-1'), ('Order', 'A-2')]",
    ]
    assert second.text.strip() == "dave"
    assert [c.tool for c in calls] == ["get_order", "whoami", "note", "list_orders", "whoami"]
    assert calls[0].arguments == {"order": "A-1"}


async def test_errors_and_hangs_reach_the_code_and_the_executor_stays_usable(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, host_tools=order_tools([]), approval="never") as ex:
        result = await ex.execute(
            "from agent_tools import fail, hang\n"
            "from ipybox_core.errors import ToolError, ToolTimeoutError\n"
            "try:\n    fail(order='B-2')\nexcept ToolError as e:\n    print('ToolError', e)\n"
            "try:\n    hang()\nexcept ToolTimeoutError as e:\n    print('ToolTimeoutError', e)\n"
        )
        again = await ex.execute("from agent_tools import note\nprint(note(order='C-3'))")
    assert result.text.splitlines() == [
        "ToolError order B-2 is locked",
        "ToolTimeoutError host tool 'hang' did not finish within 0.5 s",
    ]
    assert again.text.strip() == "noted C-3"


async def test_non_json_results_are_a_tool_error(tmp_path: Path) -> None:
    async def opaque(call: HostCall) -> object:
        return object()

    result = await run_alone(
        tmp_path,
        [HostTool("opaque", opaque)],
        "from agent_tools import opaque\nfrom ipybox_core.errors import ToolError\n"
        "try:\n    opaque()\nexcept ToolError as e:\n    print(e)",
    )
    assert "host tool 'opaque' returned a object, which is not JSON data" in result.text


async def test_approvals_rules_and_audit_log_cover_host_calls(tmp_path: Path) -> None:
    calls: list[HostCall] = []
    audit = tmp_path / "audit.jsonl"
    rules = ApprovalRules(allow=["agent_tools.whoami"], deny=["agent_tools.fail"], allow_read_only=True)
    async with CodeExecutor(
        workspace=tmp_path / "ws", host_tools=order_tools(calls), approval=rules, audit_log=audit
    ) as ex:
        code = (
            "from agent_tools import whoami, get_order, fail, note\n"
            "whoami(); get_order(order='A-1')\n"
            "try:\n    fail(order='X')\nexcept PermissionError as e:\n    print('denied:', e)\n"
            "try:\n    note(order='A-1')\nexcept PermissionError as e:\n    print('rejected:', e)\n"
        )
        asked: list[ApprovalRequest] = []
        async with ex.stream(code) as execution:
            async for event in execution:
                if isinstance(event, ApprovalRequest):
                    asked.append(event)
                    await event.reject("not now")
    assert [(r.server, r.tool, r.args) for r in asked] == [(HOST_SERVER, "note", {"order": "A-1"})]
    assert [c.tool for c in calls] == ["whoami", "get_order"]  # denied and rejected calls never ran
    records = [line for line in audit.read_text().splitlines() if line]
    assert len(records) == 4
    assert '"server": "agent_tools", "tool": "whoami"' in records[0]
    assert '"decided_by": "policy:read-only"' in records[1]
    assert '"decided_by": "policy:deny agent_tools.fail"' in records[2]


async def test_names_are_stable_and_collisions_are_refused(tmp_path: Path) -> None:
    async def echo(call: HostCall) -> str:
        return call.tool

    tools = [HostTool(name, echo) for name in ("class", "print", "search-orders")]
    (tmp_path / "agent_tools").mkdir()  # a workspace directory of that name does not hide them
    (tmp_path / "agent_tools" / "__init__.py").write_text("raise ImportError('the workspace one')\n")
    async with CodeExecutor(workspace=tmp_path, host_tools=tools, approval="never") as ex:
        result = await ex.execute(
            "from agent_tools import class_, print_, search_orders\n"
            "print(class_(), print_(), search_orders())"
        )
        assert result.text.strip() == "class print search-orders"
        with pytest.raises(ConfigError, match="belongs to the host tools"):
            await ex.register_mcp_server(HOST_SERVER, STDIO_SERVER)
    async with CodeExecutor(workspace=tmp_path / "ws2", mcp_servers={HOST_SERVER: STDIO_SERVER}) as ex:
        with pytest.raises(ConfigError, match="belongs to the host tools"):
            await ex.register_host_tools(tools)
        assert ex.host_tools == []


async def test_registering_later_replaces_the_package_in_the_running_kernel(tmp_path: Path) -> None:
    async def one(call: HostCall) -> int:
        return 1

    async def two(call: HostCall) -> int:
        return 2

    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        assert ex.api_reference() == ""
        before = await ex.execute("import agent_tools")
        await ex.register_host_tools([HostTool("one", one, "One.", output_schema={"type": "integer"})])
        assert "def one() -> int:" in ex.api_reference()
        first = await ex.execute("from agent_tools import one\nprint(one() + 1)")
        await ex.register_host_tools([HostTool("two", two, "Two.")])
        second = await ex.execute("import agent_tools\nprint(agent_tools.__all__, agent_tools.two())")
        await ex.register_host_tools([])
        gone = await ex.execute("import agent_tools")
        assert ex.api_reference() == ""
    assert before.error is not None and before.error.ename == "ModuleNotFoundError"
    assert first.text.strip() == "2"
    assert second.text.strip() == "['two'] 2"
    assert gone.error is not None and gone.error.ename == "ModuleNotFoundError"


async def test_a_schema_the_codegen_cannot_type_gets_any_with_a_note(tmp_path: Path) -> None:
    async def take(call: HostCall) -> Any:
        return call.arguments

    odd = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}
    async with CodeExecutor(workspace=tmp_path, approval="never") as ex:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await ex.register_host_tools([HostTool("take", take, "Takes anything.", odd)])
        result = await ex.execute("from agent_tools import take\nprint(take(x=[1, 'a']))")
    assert any(issubclass(w.category, CodegenWarning) and "'take'" in str(w.message) for w in caught)
    assert result.text.strip() == "{'x': [1, 'a']}"


async def test_the_kernel_never_holds_the_tools_code(tmp_path: Path) -> None:
    secret = "s3cr3t-credential"

    async def charge(call: HostCall) -> str:
        return f"charged with {secret[:2]}"

    result = await run_alone(
        tmp_path,
        [HostTool("charge", charge)],
        "import agent_tools, pathlib\n"
        "root = pathlib.Path(agent_tools.__file__).parent\n"
        "text = ''.join(p.read_text() for p in root.rglob('*.py'))\n"
        f"print({secret!r} in text, 'charged with' in text, agent_tools.charge())",
    )
    assert result.text.strip() == "False False charged with s3"


async def test_sessions_give_every_session_the_host_tools(tmp_path: Path) -> None:
    from ipybox_core.sessions import Sessions

    async def whoami(call: HostCall) -> str:
        return f"{call.context} via {call.tool}"

    async def hello(call: HostCall) -> str:
        return "hello"

    async with Sessions(
        root=tmp_path, warm=1, host_tools=[HostTool("whoami", whoami, "Who.")], approval="never"
    ) as sessions:
        assert "def whoami() -> Any:" in sessions.api_reference()
        carol = await sessions.session("carol")
        carol.executor.bind_tool_context("carol")
        first = await carol.executor.execute("from agent_tools import whoami\nprint(whoami())")
        await sessions.register_host_tools([HostTool("hello", hello, "Hello.")])
        assert "def hello() -> Any:" in sessions.api_reference() and "whoami" not in sessions.api_reference()
        dave = await sessions.session("dave")  # a warm executor, started before the change
        second = await dave.executor.execute("import agent_tools\nprint(agent_tools.__all__)")
        third = await carol.executor.execute("import agent_tools\nprint(agent_tools.hello())")
    assert first.text.strip() == "carol via whoami"
    assert second.text.strip() == "['hello']"
    assert third.text.strip() == "hello"


async def test_the_example_runs() -> None:
    done = await asyncio.to_thread(run_example, "host_tools.py")
    assert done.stdout.splitlines() == [
        "def get_order(*, order_id: str) -> Any:",
        "{'id': 'ord-1', 'total_usd': 30.0, 'status': 'delivered', 'asked_by': 'carol'}",
        "ToolError: no order ord-9",
    ]


async def test_a_sandboxed_kernel_imports_host_tools_registered_later_read_only(tmp_path: Path) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")

    async def hi(call: HostCall) -> str:
        return "hi"

    async with CodeExecutor(workspace=tmp_path, sandbox=True, approval="never") as ex:
        await ex.register_host_tools([HostTool("hi", hi)])
        result = await ex.execute(
            "import pathlib\nfrom agent_tools import hi\nprint(hi())\n"
            "import agent_tools\n"
            "try:\n    (pathlib.Path(agent_tools.__file__).parent / 'x.py').write_text('')\n"
            "except OSError as e:\n    print(type(e).__name__)"
        )
    words = result.text.split()
    assert words[0] == "hi" and words[1] in {"OSError", "PermissionError"}, result.text


async def test_a_gateway_kernel_gets_the_host_tools_shipped(tmp_path: Path, kernel_gateway: Any) -> None:
    async def hi(call: HostCall) -> str:
        return f"hi {call.context}"

    async def bye(call: HostCall) -> str:
        return "bye"

    gateway = {"kernel_gateway": kernel_gateway.url, "gateway_token": kernel_gateway.token}
    async with CodeExecutor(
        workspace=tmp_path, host_tools=[HostTool("hi", hi)], approval="never", **gateway
    ) as ex:
        ex.bind_tool_context("remote")
        first = await ex.execute("from agent_tools import hi\nprint(hi())")
        await ex.register_host_tools([HostTool("bye", bye)])
        second = await ex.execute("import agent_tools\nprint(agent_tools.__all__, agent_tools.bye())")
    assert first.text.strip() == "hi remote"
    assert second.text.strip() == "['bye'] bye"
