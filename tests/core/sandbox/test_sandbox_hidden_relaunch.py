"""Hidden paths survive what sandboxed code does before it makes its own kernel relaunch.

The code renames the directory of a secret (to ``node_modules/``, which the old scan skipped, or
away from the path an ``extra_hidden_paths`` entry names), re-points the link through which a secret
was hidden, or hard-links a secret; then it kills its kernel (``os._exit``) or ignores an interrupt
until a timeout restarts it, and reads. Each attack also runs against the old scan (monkeypatched
in: directories skipped by name, no identities, no pins) or without the sandbox, where it reads the
secret: the check can fail. The relaunch's scan runs in a worker thread, so the event loop (every
other kernel and session) goes on meanwhile: shown with a heartbeat that must tick during the scan,
and the control that runs ``wrap`` on the loop as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hidden_scan_kit import old_scan
from sandbox_kit import require_bwrap, run_attempt, start_sandboxed

from ipybox_core import KernelDied
from ipybox_core.errors import ExecutionTimeout
from ipybox_core.kernel import Kernel, KernelConfig, LaunchSpec
from ipybox_core.kernel import kernel as kernel_module
from ipybox_core.kernel.launcher import KernelLauncher
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy, _mounts
from ipybox_core.sandbox._scan import HiddenScanGaveUp

pytestmark = [pytest.mark.sandbox]

LIMITS = ResourceLimits(max_processes=64)
READ = "def attack():\n    return open({path!r}).read()"
SCANS = ["fixed", "old"]


def secret_at(path: Path) -> str:
    secret = f"secret-{secrets.token_hex(8)}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(secret)
    return secret


def weaken(monkeypatch: pytest.MonkeyPatch, scan: str) -> None:
    if scan == "old":
        monkeypatch.setattr(_mounts, "scan_user_trees", old_scan)
        monkeypatch.setattr(_mounts, "_pins", lambda *args: ())


@contextlib.asynccontextmanager
async def sandboxed(policy: SandboxPolicy, workspace: Path, **config: Any) -> AsyncIterator[Kernel]:
    kernel = await start_sandboxed(policy, workspace, **config)
    try:
        yield kernel
    finally:
        await kernel.shutdown(now=True)


async def kill_itself(kernel: Kernel) -> None:
    """The code ends its kernel; the next execution relaunches it (a new scan, new mounts)."""
    with pytest.raises(KernelDied):
        await kernel.run("import os; os._exit(0)")


async def read(kernel: Kernel, path: str) -> dict[str, object]:
    return await run_attempt(kernel, READ.format(path=path))


@pytest.mark.parametrize("scan", SCANS)
async def test_a_secret_moved_under_node_modules_stays_hidden_after_the_code_kills_its_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: str
) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    secret = secret_at(workspace / "proj" / ".env")
    weaken(monkeypatch, scan)
    async with sandboxed(SandboxPolicy(limits=LIMITS), workspace) as kernel:
        assert (await read(kernel, "proj/.env"))["blocked"]  # hidden at the first launch, either way
        moved = await kernel.run("import os\nos.rename('proj', 'node_modules')\nprint('moved')")
        assert moved.text == "moved\n", moved
        await kill_itself(kernel)
        after = await read(kernel, "node_modules/.env")
    assert (workspace / "node_modules" / ".env").read_text() == secret
    if scan == "fixed":
        assert after["blocked"] and secret not in str(after["detail"])
    else:  # control: the old scan skipped node_modules/, and the relaunched kernel read the secret
        assert not after["blocked"] and secret in str(after["detail"])


@pytest.mark.parametrize("scan", SCANS)
async def test_an_extra_hidden_path_stays_hidden_when_its_directory_is_renamed_and_a_timeout_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: str
) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    secret = secret_at(workspace / "secrets" / "key.pem")
    policy = SandboxPolicy(limits=LIMITS, extra_hidden_paths=("secrets/key.pem",))
    weaken(monkeypatch, scan)
    async with sandboxed(policy, workspace, interrupt_grace=1.0) as kernel:
        rename = await run_attempt(kernel, "import os\ndef attack():\n    os.rename('secrets', 'moved')")
        with pytest.raises(ExecutionTimeout, match="restarted"):
            await kernel.run(
                "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "while True: time.sleep(0.05)",
                timeout=1,
            )
        after = [await read(kernel, path) for path in ("secrets/key.pem", "moved/key.pem")]
    if scan == "fixed":
        assert rename["blocked"] and "Device or resource busy" in str(rename["detail"])  # pinned
        assert all(attempt["blocked"] for attempt in after), after
        assert (workspace / "secrets" / "key.pem").read_text() == secret
        # the application restarts (a new launcher that knows nothing): the path is still the policy's
        async with sandboxed(policy, workspace) as fresh:
            assert (await read(fresh, "secrets/key.pem"))["blocked"]
    else:  # control: the rename went through, and the relaunched kernel read the secret
        assert not rename["blocked"], rename
        assert after[1] == {"blocked": False, "detail": repr(secret)}


@pytest.mark.parametrize("scan", SCANS)
async def test_a_secret_hidden_through_a_link_stays_hidden_after_the_link_is_re_pointed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: str
) -> None:
    """The host's ``.env`` links to a file with a plain name; the code re-points the link and moves
    the file's directory: the launcher still knows the file by its identity."""
    require_bwrap()
    workspace = tmp_path / "ws"
    secret = secret_at(workspace / "keys" / "token.txt")
    (workspace / ".env").symlink_to(workspace / "keys" / "token.txt")
    weaken(monkeypatch, scan)
    async with sandboxed(SandboxPolicy(limits=LIMITS), workspace) as kernel:
        assert (await read(kernel, "keys/token.txt"))["blocked"]
        code = "import os\nos.unlink('.env')\nos.symlink('/dev/null', '.env')\nos.rename('keys', 'k2')\nprint('ok')"
        assert (await kernel.run(code)).text == "ok\n"
        await kill_itself(kernel)
        after = await read(kernel, "k2/token.txt")
    if scan == "fixed":
        assert after["blocked"] and secret not in str(after["detail"])
    else:
        assert after == {"blocked": False, "detail": repr(secret)}


LINK_ATTACK = """
import os
def attack():
    linked = []
    for source, name in (('.env', 'copy-of-env'), ('secrets/key.pem', 'copy-of-key')):
        try:
            os.link(source, name)  # needs no read permission on the source
            linked.append(name)
        except OSError as exc:
            linked.append(f'{name}: {exc.strerror}')
    return linked
"""


async def test_sandboxed_code_cannot_hard_link_a_hidden_file_into_view(tmp_path: Path) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    secret = secret_at(workspace / ".env")
    key = secret_at(workspace / "secrets" / "key.pem")
    policy = SandboxPolicy(limits=LIMITS, extra_hidden_paths=("secrets/key.pem",))
    async with sandboxed(policy, workspace) as kernel:
        linked = await run_attempt(kernel, LINK_ATTACK)
        await kill_itself(kernel)
        after = [await read(kernel, path) for path in (".env", "copy-of-env", "copy-of-key")]
    assert "copy-of-env: Invalid cross-device link" in str(linked["detail"])  # the name is a mount
    assert "copy-of-key: Invalid cross-device link" in str(linked["detail"])
    assert all(attempt["blocked"] for attempt in after), after
    assert not (workspace / "copy-of-env").exists() and not (workspace / "copy-of-key").exists()
    # control: without the sandbox the same code links both, and the links read the secrets
    plain = await Kernel.start(KernelConfig(cwd=workspace))
    try:
        assert (await run_attempt(plain, LINK_ATTACK))["detail"] == repr(["copy-of-env", "copy-of-key"])
        assert (await read(plain, "copy-of-env"))["detail"] == repr(secret)
        assert (await read(plain, "copy-of-key"))["detail"] == repr(key)
    finally:
        await plain.shutdown(now=True)


@pytest.mark.parametrize("scan", SCANS)
async def test_every_name_of_a_hidden_file_stays_hidden_across_a_relaunch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: str
) -> None:
    """A hard link the host made (``config/settings.txt`` is ``.env``) is hidden like ``.env``."""
    require_bwrap()
    workspace = tmp_path / "ws"
    secret = secret_at(workspace / ".env")
    (workspace / "config").mkdir()
    os.link(workspace / ".env", workspace / "config" / "settings.txt")
    weaken(monkeypatch, scan)
    async with sandboxed(SandboxPolicy(limits=LIMITS), workspace) as kernel:
        first = await read(kernel, "config/settings.txt")
        await kill_itself(kernel)
        after = await read(kernel, "config/settings.txt")
    if scan == "fixed":
        assert first["blocked"] and after["blocked"]
    else:
        assert first["detail"] == after["detail"] == repr(secret)


async def test_a_scan_past_its_bound_refuses_to_relaunch_the_kernel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed: a workspace the scan cannot finish gets no kernel (a clear error and log line)."""
    require_bwrap()
    workspace = tmp_path / "ws"
    secret_at(workspace / "proj" / ".env")
    policy = SandboxPolicy(limits=LIMITS, hidden_scan_entries=5000)
    plant = "import os\nos.makedirs('many')\nfor i in range(6000):\n    open(f'many/{i}', 'w').close()"
    async with sandboxed(policy, workspace) as kernel:
        assert (await kernel.run(plant)).error is None
        await kill_itself(kernel)
        with (
            caplog.at_level(logging.ERROR, logger="ipybox_core.sandbox._scan"),
            pytest.raises(HiddenScanGaveUp, match="the kernel is not started"),
        ):
            await kernel.run("print(open('proj/.env').read())")
        assert "hidden-path scan gave up" in caplog.text
    # control: the same workspace under a bound it fits in starts
    async with sandboxed(policy.model_copy(update={"hidden_scan_entries": 10_000}), workspace) as kernel:
        assert (await kernel.run("print(len(__import__('os').listdir('many')))")).text == "6000\n"


async def relaunch_with_heartbeat(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch, *, tick_within: float
) -> list[bool]:
    """Relaunch ``kernel``; the scan first waits up to ``tick_within`` s for the event loop's
    heartbeat to tick while it runs. Returns, per scan, whether it ticked."""
    real_scan = _mounts.scan_user_trees
    scanning, ticked = threading.Event(), threading.Event()
    seen: list[bool] = []

    def watched_scan(*args: Any, **kwargs: Any) -> Any:
        scanning.set()
        seen.append(ticked.wait(tick_within))
        try:
            return real_scan(*args, **kwargs)
        finally:
            scanning.clear()

    async def heartbeat() -> None:
        while True:
            if scanning.is_set():
                ticked.set()
            await asyncio.sleep(0.001)

    monkeypatch.setattr(_mounts, "scan_user_trees", watched_scan)
    beating = asyncio.create_task(heartbeat())
    try:
        await kill_itself(kernel)
        assert (await kernel.run("print('back')")).text == "back\n"
    finally:
        beating.cancel()
        monkeypatch.setattr(_mounts, "scan_user_trees", real_scan)
    return seen


async def test_a_relaunch_scanning_many_planted_entries_leaves_the_event_loop_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plant = (
        "import os\nfor d in range(40):\n    os.makedirs(f'planted/{d}')\n"
        "    for i in range(500):\n        open(f'planted/{d}/{i}', 'w').close()"
    )
    async with sandboxed(SandboxPolicy(limits=LIMITS), workspace) as kernel:
        assert (await kernel.run(plant)).error is None  # 20,000 entries for the relaunch to scan
        assert await relaunch_with_heartbeat(kernel, monkeypatch, tick_within=60) == [True]

        # control: wrap() on the event loop, as before: the heartbeat cannot tick during the scan
        async def on_the_loop(launcher: KernelLauncher, spec: LaunchSpec) -> LaunchSpec:
            return launcher.wrap(spec)

        monkeypatch.setattr(kernel_module, "wrap_off_loop", on_the_loop)
        assert await relaunch_with_heartbeat(kernel, monkeypatch, tick_within=0.5) == [False]
