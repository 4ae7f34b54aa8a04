"""Helpers for the codegen tests that run generated code in a real kernel: an executor with one MCP
server registered, and a call whose echoed JSON comes back."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ipybox_core import CodeExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "executor"))
from executor_kit import run


def executor_fixture(name: str, config: dict[str, Any]) -> Any:
    """A module-scoped fixture: an executor with MCP server ``name`` (``config``) registered."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
        async with CodeExecutor(workspace=tmp_path_factory.mktemp("ws"), timeout=120) as ex:
            await ex.register_mcp_server(name, config)
            yield ex

    return executor


async def echo(executor: CodeExecutor, head: str, call: str) -> dict[str, Any]:
    """Run ``head`` (imports), then print ``call``'s result, a JSON object; return that object."""
    done = await run(executor, f"{head}\nprint('ECHO', {call})\n")
    assert done.result.error is None, done.result.error
    line = next(line for line in done.text.splitlines() if line.startswith("ECHO "))
    echoed: dict[str, Any] = json.loads(line.removeprefix("ECHO "))
    return echoed


async def outcomes(executor: CodeExecutor, module: str, function: str, cases: list[str]) -> list[str]:
    """Call ``function`` of ``mcptools.<module>`` with each of ``cases`` (dict literals) in the kernel:
    ``REFUSED <first key> <first error message>`` for each call refused, ``SENT`` for each call made."""
    code = (
        "import base64, datetime as dt, uuid\n"
        "from pydantic import ValidationError\n"
        f"from mcptools.{module} import {function}\n"
        f"for kwargs in [{', '.join(cases)}]:\n"
        "    try:\n"
        f"        {function}(**kwargs)\n"
        "        print('SENT')\n"
        "    except ValidationError as error:\n"
        "        print('REFUSED', list(kwargs)[0], error.errors()[0]['msg'])\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    return [line for line in done.text.splitlines() if line.startswith(("REFUSED", "SENT"))]
