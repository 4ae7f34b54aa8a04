"""Real MCP servers as their users know them, through a real kernel (issue 27): structured content
without an output schema, a 5 MB result over Streamable HTTP, a JSON-RPC error as ToolError."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from executor_kit import run

from ipybox_core import CodeExecutor
from servers.fidelity_server import COLOURS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from test_mcp_fidelity import FIDELITY_STDIO, start_fidelity_http

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def fidelity_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, port = start_fidelity_http(tmp_path_factory.mktemp("fidelity") / "server.log")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def executor(
    tmp_path_factory: pytest.TempPathFactory, fidelity_url: str
) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("ws"), timeout=120) as ex:
        await ex.register_mcp_server("fid", FIDELITY_STDIO)
        await ex.register_mcp_server("fidhttp", {"url": fidelity_url})
        yield ex


async def test_structured_content_reaches_kernel_code(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.fid import open_document\n"
        "doc = open_document(name='a.pdf')\n"
        "print(doc, doc.structured['requestId'], isinstance(doc, str))\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert "opened a.pdf req-a.pdf True" in done.text
    assert ".structured" in executor.api_reference()  # the model is told where the data is


async def test_a_5_mb_result_over_streamable_http(executor: CodeExecutor) -> None:
    code = "from mcptools.fidhttp import big_text\nprint(len(big_text(megabytes=5)))\n"
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert "5000000" in done.text


async def test_a_json_rpc_error_is_caught_as_tool_error(executor: CodeExecutor) -> None:
    code = (
        "from ipybox_core.errors import ToolError\n"
        "from mcptools.fidhttp import run_query\n"
        "try:\n    run_query(sql='DROP it')\n"
        "except ToolError as e:\n    print('tool error', e.code, 'near' in str(e))\n"
        "print(run_query(sql='select 1'))\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert "tool error -32050 True" in done.text
    assert "1 row" in done.text


async def test_a_30_value_enum_is_shown_whole(executor: CodeExecutor) -> None:
    reference = executor.api_reference()
    line = next(line for line in reference.splitlines() if "def paint(" in line)
    assert all(f"'{colour}'" in line for colour in COLOURS), line  # was cut after 10 values
    done = await run(executor, "from mcptools.fid import paint\nprint(paint(colour='zinc'))\n")
    assert done.result.error is None, done.result.error
    assert "painted zinc" in done.text


async def test_an_app_only_tool_is_left_out(executor: CodeExecutor) -> None:
    reference = executor.api_reference()  # named as left out, so the agent does not look for it
    assert "def render_view" not in reference and "import render_view" not in reference
    assert "# Left out (for an MCP App's UI only, no function): render_view\n" in reference
    assert "open_document" in reference
    code = (
        "import mcptools.fid as fid\n"
        "print('render_view' in fid.TOOLS.values(), 'open_document' in fid.TOOLS.values())\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert "False True" in done.text
