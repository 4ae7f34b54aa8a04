"""Ordinary work keeps working inside the bubblewrap sandbox (one shared sandboxed kernel)."""

from __future__ import annotations

import ast
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from sandbox_kit import require_bwrap, start_sandboxed, unix_server

from ipybox_core.errors import ExecutionTimeout
from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.sandbox import BwrapLauncher, ResourceLimits, SandboxPolicy

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.sandbox]

HOST_ONLY_VARIABLE = "IPYBOX_TEST_HOST_ONLY"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_bwrap()
    path = tmp_path_factory.mktemp("work")
    (path / "data.txt").write_text("workspace data\n")
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(workspace: Path) -> AsyncIterator[Kernel]:
    os.environ[HOST_ONLY_VARIABLE] = "host-value"
    policy = SandboxPolicy(limits=ResourceLimits(max_processes=128))
    kernel = await start_sandboxed(policy, workspace, env={"GIVEN_VARIABLE": "given"})
    try:
        yield kernel
    finally:
        os.environ.pop(HOST_ONLY_VARIABLE, None)
        await kernel.shutdown(now=True)


async def run_ok(kernel: Kernel, code: str) -> str:
    output = await kernel.run(code)
    assert output.error is None, f"{output.error}\n{output.error.traceback if output.error else ''}"
    return output.text


async def test_pure_python_computation_and_state(kernel: Kernel) -> None:
    await run_ok(kernel, "import math\nvalues = [math.factorial(n) for n in range(20)]")
    assert (await run_ok(kernel, "print(sum(values) % 1000003)")).strip() == str(
        sum(__import__("math").factorial(n) for n in range(20)) % 1000003
    )


async def test_matplotlib_plot_is_returned_as_png(kernel: Kernel) -> None:
    output = await kernel.run(
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('sandboxed')\nplt.show()"
    )
    assert output.error is None, output.error
    assert output.images and output.images[0].startswith(b"\x89PNG\r\n\x1a\n")


async def test_workspace_read_and_write_reach_the_host(kernel: Kernel, workspace: Path) -> None:
    name = f"out-{secrets.token_hex(3)}.txt"
    text = await run_ok(
        kernel, f"print(open('data.txt').read().strip())\nopen('{name}', 'w').write('from kernel')"
    )
    assert "workspace data" in text
    assert (workspace / name).read_text() == "from kernel"


async def test_shell_commands_run(kernel: Kernel) -> None:
    text = await run_ok(kernel, "!ls\n!echo shell-works && id -u")
    assert "data.txt" in text and "shell-works" in text


async def test_the_hosts_runtime_dir_is_invisible_but_the_kernels_own_sockets(kernel: Kernel) -> None:
    """The host keeps the connection file and its sockets in the runtime dir: the kernel sees only
    its own socket directory there (a socket meant for it is passed with ``sockets=``)."""
    path = str(kernel.runtime_dir / "late.sock")
    with unix_server(path, "late") as server:
        text = await run_ok(
            kernel,
            "import os, socket\ns = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect({path!r})\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
            f"print(sorted(os.listdir({str(kernel.runtime_dir)!r})))\n"
            f"for name in sorted(os.listdir({str(kernel.runtime_dir)!r})):\n"
            f"    try:\n        open(os.path.join({str(kernel.runtime_dir)!r}, name), 'a')\n"
            "    except OSError as exc:\n        print(name, type(exc).__name__)",
        )
        assert server.connections == 0
    lines = text.splitlines()
    assert lines[0] == "FileNotFoundError"
    visible = ast.literal_eval(lines[1])
    name = visible[0].partition(".")[0]
    generation = visible[0].partition(".")[2]
    # its socket directory, and the connection and bootstrap files it read at start, read-only
    assert visible == [f"{name}.{generation}", f"{name}.json", f"{name}_bootstrap.py"]
    refusals = [line.split() for line in lines[2:]]
    assert refusals[0] == [f"{name}.{generation}", "IsADirectoryError"]
    # read-only mounts: EROFS, or EACCES first for an unprivileged kernel (the files are root's)
    assert refusals[1][0] == f"{name}.json" and refusals[1][1] in {"OSError", "PermissionError"}
    assert refusals[2][0] == f"{name}_bootstrap.py" and refusals[2][1] in {"OSError", "PermissionError"}


async def test_private_tmp_is_writable_and_invisible_to_the_host(kernel: Kernel) -> None:
    name = f"/tmp/ipybox-private-{secrets.token_hex(3)}"
    text = await run_ok(
        kernel, f"open({name!r}, 'w').write('x')\nimport tempfile\nprint(tempfile.gettempdir())"
    )
    assert text.strip() == "/tmp"
    assert not Path(name).exists()


async def test_environment_is_exactly_the_launch_environment(kernel: Kernel) -> None:
    text = await run_ok(
        kernel,
        "import os\nprint(os.environ.get('GIVEN_VARIABLE'), os.environ.get('IPYBOX_TEST_HOST_ONLY'),\n"
        "      os.environ.get('JPY_PARENT_PID'), os.environ['HOME'], os.access(os.environ['HOME'], os.W_OK))",
    )
    assert text.split() == ["given", "None", "None", "/tmp/ipybox-home", "True"]


async def test_subprocesses_threads_and_multiprocessing(kernel: Kernel) -> None:
    text = await run_ok(
        kernel,
        "import multiprocessing, subprocess, sys, threading\n"
        "with multiprocessing.Pool(2) as pool:\n"
        "    squares = pool.map(abs, [-1, -2, -3])\n"
        "threads = [threading.Thread(target=lambda: None) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "child = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True)\n"
        "print(squares, child.stdout.strip())",
    )
    assert text.strip() == "[1, 2, 3] 42"


async def test_interrupt_by_message_keeps_state(kernel: Kernel) -> None:
    assert kernel.interrupt_mode == "message"
    await run_ok(kernel, "kept = 'still here'")
    with pytest.raises(ExecutionTimeout):
        await kernel.run("import time\ntime.sleep(30)", timeout=1.0)
    assert (await run_ok(kernel, "print(kept)")).strip() == "still here"


async def test_restart_is_sandboxed_again(kernel: Kernel) -> None:
    generation = kernel.generation
    await kernel.restart()
    assert kernel.generation == generation + 1
    text = await run_ok(
        kernel,
        "import os, socket\n"
        "try:\n    open('/etc/shadow').read(); shadow = 'READ'\nexcept OSError as e:\n    shadow = type(e).__name__\n"
        "print(socket.gethostname(), os.environ.get('IPYBOX_SANDBOX'), shadow, 'kept' in dir())",
    )
    assert text.split() == ["ipybox", "bwrap", "PermissionError", "False"]


async def test_listed_host_socket_outside_the_runtime_dir(workspace: Path) -> None:
    """``sockets=`` shows one host socket (say the tool server's), not its neighbours."""
    elsewhere = Path(tempfile.mkdtemp(prefix="ipybox-t-", dir="/tmp"))
    tools, other = str(elsewhere / "tools.sock"), str(elsewhere / "other.sock")
    try:
        with unix_server(tools, "tools"), unix_server(other, "other"):
            launcher = BwrapLauncher(SandboxPolicy(), workspace=workspace, sockets=[tools])
            kernel = await Kernel.start(KernelConfig(cwd=workspace, launcher=launcher))
            try:
                text = await run_ok(
                    kernel,
                    "import os, socket\n"
                    "def reach(path):\n"
                    "    try:\n"
                    "        s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(path)\n"
                    "        return s.recv(64).decode()\n"
                    "    except OSError as exc:\n"
                    "        return type(exc).__name__\n"
                    "def remove(path):\n"
                    "    try:\n"
                    "        os.unlink(path)\n"
                    "        return 'removed'\n"
                    "    except OSError as exc:\n"
                    "        return type(exc).__name__\n"
                    f"print(reach({tools!r}), reach({other!r}), remove({tools!r}))",
                )
                reached, missing, removal = text.split()
                assert (reached, missing) == ("reached:tools", "FileNotFoundError")
                assert removal in {"OSError", "PermissionError"}  # a mount point (EBUSY, or EACCES first)
            finally:
                await kernel.shutdown(now=True)
                launcher.close()
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
