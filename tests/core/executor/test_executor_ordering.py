"""Approval requests come after the output the code printed before the call, on both backends.

The order is the kernel's (an output mark published before the request), not a timing guess: the
loops below print and call at once, many times, so a request that overtakes its output shows up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from executor_kit import executor_on

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult, OutputChunk

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROUNDS = 40


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["local", "gateway"])
async def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CodeExecutor]:
    async with executor_on(request, tmp_path_factory, timeout=120) as ex:
        yield ex


async def _requests_with_output_before(executor: CodeExecutor, code: str) -> list[tuple[str, dict[str, str]]]:
    """(request name and args, stream name → text handed out before it) for each approval request."""
    seen: list[tuple[str, dict[str, str]]] = []
    text = {"stdout": "", "stderr": ""}
    result: ExecutionResult | None = None
    async with executor.stream(code) as execution:
        async for event in execution:
            if isinstance(event, OutputChunk):
                text[event.stream] += event.text
            elif isinstance(event, ApprovalRequest):
                seen.append((f"{event.name}{sorted(event.args.items())}", dict(text)))
                await event.accept()
            elif isinstance(event, ExecutionResult):
                result = event
    assert result is not None and result.error is None, result
    return seen


async def test_each_request_comes_after_the_output_printed_before_it(executor: CodeExecutor) -> None:
    code = (
        "import sys\n"
        "from mcptools.test import add\n"
        f"for i in range({ROUNDS}):\n"
        "    print(f'out {i}')\n"
        "    if i % 3 == 0:\n"
        "        print(f'err {i}', file=sys.stderr)\n"
        "    sys.stdout.write('x' * (i * 50))\n"
        "    add(a=i, b=0)\n"
    )
    seen = await _requests_with_output_before(executor, code)
    assert len(seen) == ROUNDS
    for i, (request, before) in enumerate(seen):
        assert request == f"test.add[('a', {i}), ('b', 0)]"
        assert before["stdout"].endswith(f"out {i}\n" + "x" * (i * 50)), (i, before["stdout"][-100:])
        assert before["stderr"].endswith(f"err {i - i % 3}\n"), (i, before["stderr"][-100:])
