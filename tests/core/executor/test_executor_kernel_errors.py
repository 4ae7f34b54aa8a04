"""Kernel code has one import for the errors a tool call raises, in a local kernel and on a gateway:
``ipybox_core.errors`` (re-exported by ``ipybox_core``), the same classes the runtime raises."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from executor_kit import executor_on, run

from ipybox_core import CodeExecutor

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["local", "gateway"])
async def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CodeExecutor]:
    async with executor_on(request, tmp_path_factory, approval="never") as ex:
        yield ex


@pytest.mark.parametrize("module", ["ipybox_core.errors", "ipybox_core"])
async def test_the_documented_import_catches_a_tool_error(executor: CodeExecutor, module: str) -> None:
    code = (
        f"from {module} import ToolError\n"
        "from mcptools.test import fail\n"
        "try:\n"
        "    fail(kind='tool_error')\n"
        "except ToolError as error:\n"
        "    print('caught:', error, '|', error.server, error.tool)\n"
    )
    result = (await run(executor, code)).result
    assert result.error is None, result.error
    assert result.text == "caught: Error executing tool fail: the widget is broken | test fail\n"


async def test_one_class_per_error_in_the_kernel(executor: CodeExecutor) -> None:
    code = (
        "import ipybox_core, ipybox_core.errors as errors, ipybox_core.runtime as runtime\n"
        "names = ['ToolError', 'McpServerError', 'ToolTimeoutError', 'ToolServerUnavailable']\n"
        "print(all(getattr(errors, n) is getattr(runtime, n) for n in names),\n"
        "      ipybox_core.ToolError is errors.ToolError, ipybox_core.McpServerError is errors.McpServerError)\n"
        "print(issubclass(errors.ToolError, errors.IpyboxError), issubclass(errors.McpServerError, ConnectionError))\n"
    )
    result = (await run(executor, code)).result
    assert result.error is None, result.error
    assert result.text == "True True True\nTrue True\n"
