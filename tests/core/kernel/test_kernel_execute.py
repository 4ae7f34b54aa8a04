"""Executing code in a real IPython kernel: state, streaming, rich output, errors, shell, limits.

One kernel per backend (local, and on a Jupyter Kernel Gateway) is shared by the module (tests that
would disturb it use their own); tests of what only a local kernel has run on the local one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from _backends import BACKENDS, make_kernel

from ipybox_core.errors import ExecutorBusy
from ipybox_core.kernel import (
    DisplayData,
    ExecutionError,
    ExecutionFinished,
    Kernel,
    KernelConfig,
    KernelEvent,
    OutputTruncated,
    StreamText,
)
from ipybox_core.kernel._base import KernelBase

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET_NAME = "IPYBOX_TEST_HOST_SECRET"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def kernel(
    request: pytest.FixtureRequest, workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[KernelBase]:
    extra = tmp_path_factory.mktemp("extra_path")
    (extra / "extra_module_for_test.py").write_text("VALUE = 'from python_path'\n")
    os.environ[SECRET_NAME] = "host-only-secret"
    config = KernelConfig(cwd=workspace, env={"GIVEN_VAR": "given"}, python_path=[extra], output_limit=2000)
    try:
        async with make_kernel(request, request.param, config) as kernel:
            yield kernel
    finally:
        del os.environ[SECRET_NAME]


async def events_of(kernel: Kernel, code: str) -> list[KernelEvent]:
    return [event async for event in kernel.execute(code)]


async def test_state_persists_between_executions(kernel: Kernel) -> None:
    await kernel.run("counter = 41")
    output = await kernel.run("counter += 1\ncounter")
    assert output.text == "42\n"
    assert output.result is not None and output.result.is_result
    assert output.error is None and output.status == "ok"


async def test_top_level_await(kernel: Kernel) -> None:
    output = await kernel.run(
        "import asyncio\nawait asyncio.sleep(0.01)\nawait asyncio.sleep(0, result='awaited')"
    )
    assert output.text == "'awaited'\n"


async def test_events_end_with_finished_and_count_executions(kernel: Kernel) -> None:
    first = await events_of(kernel, "1 + 1")
    second = await events_of(kernel, "2 + 2")
    assert isinstance(first[-1], ExecutionFinished) and isinstance(second[-1], ExecutionFinished)
    assert first[-1].status == "ok"
    assert first[-1].execution_count is not None
    assert second[-1].execution_count == first[-1].execution_count + 1


async def test_stdout_and_stderr_arrive_in_order(kernel: Kernel) -> None:
    code = (
        "import sys\n"
        "for i in range(3):\n"
        "    print('out', i, flush=True)\n"
        "    print('err', i, file=sys.stderr, flush=True)\n"
    )
    chunks = [(e.name, e.text) for e in await events_of(kernel, code) if isinstance(e, StreamText)]
    lines = [(name, line) for name, text in chunks for line in text.splitlines()]
    assert lines == [(n, f"{n[3:]} {i}") for i in range(3) for n in ("stdout", "stderr")]


async def test_output_is_streamed_while_the_code_runs(kernel: Kernel, tmp_path: Path) -> None:
    # The code waits for a file the test only creates after it saw the first line: without live
    # streaming this would never finish.
    flag = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('first', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}): time.sleep(0.01)\n"
        "print('second')\n"
    )
    seen: list[str] = []
    async for event in kernel.execute(code, timeout=60):
        if isinstance(event, StreamText):
            seen.append(event.text)
            if event.text == "first\n":
                flag.touch()
    assert "".join(seen) == "first\nsecond\n"


async def test_display_html_markdown(kernel: Kernel) -> None:
    code = (
        "from IPython.display import HTML, Markdown, display\n"
        "display(HTML('<b>bold</b>'))\n"
        "display(Markdown('# Title'))\n"
    )
    displays = [e for e in await events_of(kernel, code) if isinstance(e, DisplayData)]
    assert [d.html for d in displays] == ["<b>bold</b>", None]
    assert displays[1].text == "# Title"
    assert not any(d.is_result for d in displays)


async def test_matplotlib_figure_becomes_a_png(kernel: Kernel) -> None:
    output = await kernel.run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t');")
    assert output.error is None, output.error
    assert len(output.images) == 1
    assert output.images[0].startswith(b"\x89PNG\r\n\x1a\n")
    assert "Figure" not in output.text, "the figure's text/plain stand-in is not part of the text"


async def test_error_traceback_is_clean(kernel: Kernel) -> None:
    code = "def inner():\n    raise ValueError('boom')\ninner()"
    events = await events_of(kernel, code)
    errors = [e for e in events if isinstance(e, ExecutionError)]
    assert len(errors) == 1
    error = errors[0]
    assert (error.ename, error.evalue) == ("ValueError", "boom")
    assert "\x1b" not in error.traceback
    assert "raise ValueError('boom')" in error.traceback
    assert error.traceback.endswith("ValueError: boom")
    assert isinstance(events[-1], ExecutionFinished) and events[-1].status == "error"
    output = await kernel.run(code)
    assert output.error is not None
    assert (output.error.ename, output.error.evalue) == ("ValueError", "boom")
    assert output.error.traceback.endswith("ValueError: boom")


async def test_ipybox_internal_frames_are_hidden(kernel: Kernel) -> None:
    # runtime.call_tool raises from inside ipybox_core/runtime.py; only the user's line remains.
    output = await kernel.run("from ipybox_core import runtime\nruntime.call_tool('srv', 'tool', {})")
    assert output.error is not None
    assert output.error.ename == "ToolServerUnavailable"
    assert "runtime.call_tool('srv', 'tool', {})" in output.error.traceback
    assert "runtime.py" not in output.error.traceback
    assert "File " not in output.error.traceback


async def test_syntax_error(kernel: Kernel) -> None:
    output = await kernel.run("x = (")
    assert output.error is not None
    assert output.error.ename == "SyntaxError"
    assert "x = (" in output.error.traceback
    assert "\x1b" not in output.error.traceback


async def test_shell_escape_and_bash_cell(kernel: Kernel) -> None:
    output = await kernel.run("name = 'world'\n!echo hello $name")
    assert output.text == "hello world\n"
    output = await kernel.run("%%bash\nfor i in 1 2; do echo line $i; done\necho oops >&2")
    assert output.text == "line 1\nline 2\noops\n"


@pytest.mark.parametrize("kernel", ["local"], indirect=True)  # a gateway's kernels get its environment
async def test_host_environment_is_not_inherited(kernel: Kernel) -> None:
    output = await kernel.run(
        "import os\n"
        f"print(os.environ.get({SECRET_NAME!r}), os.environ['GIVEN_VAR'], os.environ['MPLBACKEND'])\n"
        "print('JPY_PARENT_PID' in os.environ, os.environ['PATH'].split(os.pathsep)[0])"
    )
    assert output.text == (
        f"None given module://matplotlib_inline.backend_inline\nTrue {os.path.dirname(sys.executable)}\n"
    )


async def test_cwd_and_python_path(kernel: Kernel, workspace: Path) -> None:
    output = await kernel.run(
        "import os, extra_module_for_test\nprint(os.getcwd(), extra_module_for_test.VALUE)"
    )
    assert output.text == f"{workspace} from python_path\n"


async def test_packages_created_after_start_are_importable(kernel: Kernel, tmp_path: Path) -> None:
    await kernel.run(f"import sys; sys.path.insert(0, {str(tmp_path)!r})")
    await kernel.run("try:\n    import late_pkg\nexcept ImportError:\n    pass")  # caches the miss
    package = tmp_path / "late_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("X = 5\n")
    output = await kernel.run("import late_pkg\nlate_pkg.X")
    assert output.text == "5\n"


async def test_update_environment_reaches_the_kernel(kernel: Kernel, tmp_path: Path) -> None:
    (tmp_path / "added_later_module.py").write_text("Y = 7\n")
    await kernel.update_environment({"ADDED_VAR": "added"}, python_path=[tmp_path])
    output = await kernel.run(
        "import os, added_later_module\nprint(os.environ['ADDED_VAR'], added_later_module.Y)"
    )
    assert output.text == "added 7\n"


async def test_silent_execution_leaves_no_trace(kernel: Kernel) -> None:
    before = await events_of(kernel, "1")
    output = await kernel.run("hidden_value = 3\nhidden_value", silent=True)
    assert output.result is None
    after = await events_of(kernel, "hidden_value")
    assert isinstance(before[-1], ExecutionFinished) and isinstance(after[-1], ExecutionFinished)
    assert after[-1].execution_count == (before[-1].execution_count or 0) + 1
    assert (await kernel.run("hidden_value")).text == "3\n"


async def test_huge_output_is_truncated_head_and_tail(kernel: Kernel) -> None:
    code = "import sys\nfor i in range(50_000):\n    sys.stdout.write(f'{i:07d}' + 'x' * 992 + '\\n')"
    streamed = 0
    truncations: list[OutputTruncated] = []
    async for event in kernel.execute(code):
        if isinstance(event, StreamText):
            streamed += len(event.text)
        elif isinstance(event, OutputTruncated):
            truncations.append(event)
    assert streamed <= 2000 + 1000, "only the head (limit) and the tail (limit // 2) are yielded"
    assert len(truncations) == 1 and truncations[0].omitted_chars == 50_000_000 - streamed

    output = await kernel.run(code)
    assert output.text.startswith("0000000xxx")
    assert output.text.rstrip().endswith("x" * 50)
    assert "0049999" in output.text
    assert output.omitted_chars == 50_000_000 - 2000
    assert f"[... {output.omitted_chars:,} characters omitted ...]" in output.text
    assert len(output.text) < 2000 + 100


async def test_huge_subprocess_output_is_truncated_too(kernel: Kernel) -> None:
    output = await kernel.run(
        "import subprocess\nsubprocess.run('yes | head -n 300000; echo END', shell=True)"
    )
    assert output.omitted_chars > 500_000
    assert output.text.startswith("y\ny\n")
    assert output.text.endswith("y\nEND\n")


# A platform condition, not a prerequisite: only Linux has /proc/self/clear_refs.
@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(),
    reason="needs Linux /proc/self/clear_refs to reset the peak RSS",
)
async def test_huge_output_uses_bounded_memory(kernel: Kernel) -> None:
    """200 MB printed in 5 MB pieces: the host's peak memory grows far less than that."""
    clear_refs = Path("/proc/self/clear_refs")
    clear_refs.write_text("5")
    before = _peak_rss_mb()
    output = await kernel.run(
        "import sys\nfor i in range(40):\n    sys.stdout.write('y' * 5_000_000); sys.stdout.flush()"
    )
    growth = _peak_rss_mb() - before
    assert output.omitted_chars == 200_000_000 - 2000
    assert growth < 60, f"peak RSS grew by {growth} MB while 200 MB of output were printed"


async def test_second_concurrent_execution_is_refused(kernel: Kernel) -> None:
    # one write: print() writes the text and the newline apart, which a loaded kernel may send apart
    running = kernel.execute(
        "import sys, time\nsys.stdout.write('running\\n'); sys.stdout.flush(); time.sleep(0.2)"
    )
    first = await anext(running)
    assert first == StreamText("stdout", "running\n")
    with pytest.raises(ExecutorBusy):
        await kernel.run("1")
    rest = [first] + [event async for event in running]
    assert isinstance(rest[-1], ExecutionFinished)
    assert (await kernel.run("'usable'")).text == "'usable'\n"


async def test_abandoning_an_execution_interrupts_it(kernel: Kernel) -> None:
    async for event in kernel.execute(
        "print('started', flush=True)\nimport time\nwhile True: time.sleep(0.01)"
    ):
        assert isinstance(event, StreamText)
        break  # the iterator is dropped here: the kernel must be interrupted, not left busy
    output = await kernel.run("'next'", timeout=30)
    assert output.text == "'next'\n"


def _peak_rss_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM in /proc/self/status")


async def test_cwd_changes_persist_unless_reset_cwd(kernel: Kernel, workspace: Path, tmp_path: Path) -> None:
    await kernel.run(f"import os; os.chdir({str(tmp_path)!r})")
    assert (await kernel.run("import os; print(os.getcwd())")).text == f"{tmp_path}\n"
    await kernel.run(f"os.chdir({str(workspace)!r})")

    async with Kernel(KernelConfig(cwd=workspace, reset_cwd=True)) as resetting:
        await resetting.run(f"import os; os.chdir({str(tmp_path)!r})")
        assert (await resetting.run("print(os.getcwd())")).text == f"{workspace}\n"


async def test_huge_result_value_is_truncated(kernel: Kernel) -> None:
    output = await kernel.run("'x' * 10_000_000")
    assert output.result is not None
    plain = output.result.data["text/plain"]
    assert len(plain) < 2000 + 100
    assert "characters omitted" in plain
    assert len(output.text) < 2000 + 200
