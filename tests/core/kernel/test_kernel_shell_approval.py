"""The shell hook: every IPython shell escape asks ``runtime.approve_shell_command`` first.

The tool server that answers for real is not involved: inside the kernel the approval function is
replaced by one that records each command and rejects those containing "FORBIDDEN".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from _backends import BACKENDS, make_kernel

from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.kernel._base import KernelBase

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAKE_APPROVAL = """
import ipybox_core.runtime as _runtime
asked = []
def _fake_approve(command):
    asked.append(command)
    if "FORBIDDEN" in command:
        raise PermissionError(f"shell command rejected: {command}")
_runtime.approve_shell_command = _fake_approve
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def kernel(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[KernelBase]:
    workspace = tmp_path_factory.mktemp("ws")
    config = KernelConfig(cwd=workspace, shell_approval=True)
    async with make_kernel(request, request.param, config) as kernel:
        output = await kernel.run(FAKE_APPROVAL)
        assert output.error is None, output.error
        yield kernel


async def asked_commands(kernel: Kernel) -> list[str]:
    output = await kernel.run("print(repr(asked)); asked.clear()")
    commands: list[str] = eval(output.text)
    return commands


@pytest.mark.parametrize(
    ("code", "expected_text", "expected_command"),
    [
        ("word = 'expanded'\n!echo $word {1 + 1}", "expanded 2\n", "echo expanded 2"),
        ("!!echo bang", "['bang']\n", "echo bang"),
        ("lines = !echo assigned\nprint(lines)", "['assigned']\n", "echo assigned"),
        ("%sx echo sx", "['sx']\n", "echo sx"),
        ("get_ipython().system('echo direct')", "direct\n", "echo direct"),
        ("print(get_ipython().getoutput('echo out'))", "['out']\n", "echo out"),
        ("%%bash\necho from bash", "from bash\n", "%%script bash\necho from bash"),
        ("%%sh\necho from sh", "from sh\n", "%%script sh\necho from sh"),
        ("%%script bash\necho from script", "from script\n", "%%script bash\necho from script"),
    ],
)
async def test_approved_commands_run(
    kernel: Kernel, code: str, expected_text: str, expected_command: str
) -> None:
    output = await kernel.run(code)
    assert output.error is None, output.error
    assert output.text.replace("\r\n", "\n") == expected_text
    assert await asked_commands(kernel) == [expected_command]


async def test_approval_also_covers_commands_in_functions(kernel: Kernel) -> None:
    output = await kernel.run("def f():\n    local = 'inner'\n    !echo $local\nf()")
    assert output.text == "inner\n"
    assert await asked_commands(kernel) == ["echo inner"]


@pytest.mark.parametrize(
    "code",
    [
        "!touch FORBIDDEN_bang",
        "x = !touch FORBIDDEN_assign",
        "%sx touch FORBIDDEN_sx",
        "%%bash\ntouch FORBIDDEN_bash",
        "get_ipython().system('touch FORBIDDEN_direct')",
    ],
)
async def test_rejected_command_raises_and_does_not_run(kernel: Kernel, code: str) -> None:
    output = await kernel.run(code)
    assert output.error is not None
    assert output.error.ename == "PermissionError"
    assert "shell command rejected: " in output.error.evalue
    assert "bootstrap" not in output.error.traceback, "ipybox's hook frames are hidden"
    listing = await kernel.run("import os\nprint(sorted(n for n in os.listdir() if 'FORBIDDEN' in n))")
    assert listing.text == "[]\n", "a rejected command must not run"
    await asked_commands(kernel)


async def test_without_shell_approval_nothing_is_asked(tmp_path: Path) -> None:
    async with Kernel(KernelConfig(cwd=tmp_path)) as plain:
        await plain.run(FAKE_APPROVAL)
        output = await plain.run("!echo FORBIDDEN but allowed")
        assert output.text == "FORBIDDEN but allowed\n"
        assert (await plain.run("asked")).text == "[]\n"
