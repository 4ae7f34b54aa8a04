"""A stateful kernel on a Jupyter Kernel Gateway / Enterprise Gateway (REST + websocket)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipybox_core.errors import ConfigError, KernelDied, KernelError, KernelStartError
from ipybox_core.kernel._base import KernelBase
from ipybox_core.kernel._launch import MPL_INLINE_BACKEND
from ipybox_core.kernel._loop import execute_loop
from ipybox_core.kernel._traceback import hidden_path_prefixes
from ipybox_core.kernel._transport import Channel, Message
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.gateway import _shipping
from ipybox_core.kernel.gateway._rest import GatewayRest, delete_kernel_now
from ipybox_core.kernel.gateway._websocket import GatewayChannels
from ipybox_core.kernel.gateway.config import GatewayConfig
from ipybox_core.kernel.output import ExecutionOutput, OutputCollector

logger = logging.getLogger(__name__)

_SANDBOX_REFUSAL = (
    "a gateway kernel cannot be sandboxed by ipybox (bubblewrap wraps a local process); the "
    "gateway's own isolation applies instead (Enterprise Gateway: a container or pod per kernel)"
)


@dataclass(eq=False)
class _Remote:
    """What must be released even if the GatewayKernel object is dropped without shutdown()."""

    gateway: GatewayConfig
    kernel_id: str | None = None


def _release(remote: _Remote) -> None:
    kernel_id, remote.kernel_id = remote.kernel_id, None
    if kernel_id is not None:
        delete_kernel_now(remote.gateway, kernel_id)


class GatewayKernel(KernelBase):
    """A stateful IPython kernel started on a Jupyter Kernel Gateway or Enterprise Gateway.

    It behaves like the local :class:`~ipybox_core.kernel.Kernel` (same events, timeouts, interrupts,
    restarts, death detection, output limits) and satisfies
    :class:`~ipybox_core.kernel.backend.KernelBackend`. ipybox need not be installed where the
    kernel runs (generated APIs need ``pydantic`` there): ``ipybox_core.runtime`` and the kernel
    bootstrap are shipped into a private directory of the kernel at start and after every restart,
    and so are packages given to :meth:`install_package`.

    From ``config`` it uses ``env``, ``python_path`` and ``cwd`` (paths on the kernel's machine),
    ``shell_approval``, ``output_limit``, ``reset_cwd``, ``interrupt_grace``,
    ``interrupt_mode`` (None or ``"signal"``: the gateway's interrupt endpoint; ``"message"``: an
    ``interrupt_request`` on the control channel) and ``hidden_frame_paths``. A ``launcher``
    (sandbox), ``kernel_args``, ``runtime_dir`` or ``python`` cannot apply to a remote kernel and
    raise :class:`~ipybox_core.errors.ConfigError`. ``env_files`` maps environment variable names
    to file contents: each is written into the kernel's private directory and the variable set to
    the file's path (e.g. a CA bundle for ``IPYBOX_TOOL_CA``).
    """

    def __init__(
        self,
        gateway: GatewayConfig,
        config: KernelConfig | None = None,
        *,
        env_files: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(config)
        self.gateway = gateway
        _check_config(self.config)
        self._env_files = dict(env_files or {})
        self._remote = _Remote(gateway)
        self._finalizer = weakref.finalize(self, _release, self._remote)
        self._rest: GatewayRest | None = None
        self._channels: GatewayChannels | None = None
        self._boot_id = ""
        self._boot_restarts = 0
        self._remote_root: str | None = None
        self._env_overrides: dict[str, str] = {}
        self._extra_python_path: list[str] = []
        self._packages: dict[str, dict[str, str]] = {}
        self._unshipped: dict[str, dict[str, str] | None] = {}
        self._interrupts: set[asyncio.Task[None]] = set()

    # --- lifecycle --------------------------------------------------------------------------------

    @classmethod
    async def start(
        cls,
        gateway: GatewayConfig,
        config: KernelConfig | None = None,
        *,
        env_files: Mapping[str, str] | None = None,
    ) -> GatewayKernel:
        """Start a kernel on the gateway and set it up; raises :class:`KernelStartError`."""
        kernel = cls(gateway, config, env_files=env_files)
        await kernel._boot()
        return kernel

    async def _boot(self) -> None:
        self._check_open()
        if self._started:
            return
        async with self._lifecycle:
            if self._started:
                return
            self._rest = GatewayRest(self.gateway)
            self._generation += 1
            try:
                await self._start_new_kernel()
            except BaseException:
                self._closed = True
                await self._discard()
                raise
            self._started = True

    async def _start_new_kernel(self) -> None:
        rest = self._require_rest()
        started = time.monotonic()
        post_env = {k: v for k, v in self.config.env.items() if k.startswith("KERNEL_")}
        self._remote.kernel_id = await rest.start_kernel(post_env, self.gateway.startup_timeout)
        await self._connect_and_set_up(started)

    async def _connect_and_set_up(self, started: float) -> None:
        """Open the websocket to the current kernel, wait until it answers, ship the set-up."""
        kernel_id = self._require_kernel_id()
        remaining = max(1.0, self.gateway.startup_timeout - (time.monotonic() - started))
        try:
            channels = await GatewayChannels.open(
                self.gateway, kernel_id, remaining, output_limit=self.config.output_limit
            )
        except KernelError as exc:
            raise KernelStartError(str(exc)) from None
        self._channels = channels
        self._boot_restarts = channels.restarts
        await self._wait_ready(channels, started)
        await self._set_up(channels)

    async def _wait_ready(self, channels: GatewayChannels, started: float) -> None:
        """Wait for a kernel_info reply on shell and for output of the kernel on iopub.

        The gateway subscribes a new websocket's iopub socket asynchronously (and skips its own
        check when it thinks the kernel is busy, e.g. after a restart): messages published before
        the subscription is live are lost, so ask until the kernel's status messages arrive.
        """
        timeout = self.gateway.startup_timeout
        channels.listen(True)
        try:
            asked: set[str] = set()
            replied = subscribed = False
            while not (replied and subscribed):
                asked.add(await channels.send("shell", "kernel_info_request", {}))
                resend_at = time.monotonic() + 0.5
                while not (replied and subscribed) and time.monotonic() < resend_at:
                    message = await channels.receive(0.1)
                    if message is not None and message["parent_header"].get("msg_id") in asked:
                        replied = replied or message["msg_type"] == "kernel_info_reply"
                        subscribed = subscribed or message["channel"] == "iopub"
                    if channels.closed or channels.dead:
                        raise KernelStartError(
                            f"the kernel on the gateway at {self.gateway.url} stopped during start-up "
                            f"({channels.lost or 'its restart failed'})"
                        )
                if time.monotonic() - started > timeout:
                    raise KernelStartError(
                        f"the kernel on the gateway at {self.gateway.url} did not become ready within "
                        f"{timeout:g} s"
                    )
        finally:
            channels.listen(False)

    async def _set_up(self, channels: GatewayChannels) -> None:
        """Ship the runtime, bootstrap, environment and packages into a fresh kernel state."""
        boot_id = secrets.token_hex(8)
        config = self.config
        code = _shipping.setup_code(
            boot_id=boot_id,
            packages=self._packages,
            env={"MPLBACKEND": MPL_INLINE_BACKEND, **config.env, **self._env_overrides},
            env_files=self._env_files,
            python_path=[*self._extra_python_path, *(str(p) for p in config.python_path)],
            cwd=str(config.cwd) if config.cwd is not None else None,
            shell_approval=config.shell_approval,
            output_limit=config.output_limit,
            reset_cwd=config.reset_cwd,
        )
        output = await self._collect(channels, code)
        report = _shipping.parse_report(output.text)
        if output.error is not None or report is None:
            detail = output.error.traceback if output.error is not None else output.text[-2000:]
            raise KernelStartError(f"setting up the kernel on the gateway failed:\n{detail}")
        status = (await self._collect(channels, _shipping.status_code())).text.strip()
        if status != boot_id:
            raise KernelStartError(f"setting up the kernel on the gateway failed:\n{status[-2000:]}")
        self._boot_id = boot_id
        self._unshipped.clear()
        self._remote_root = report.root
        self._hidden_prefixes = hidden_path_prefixes(
            [Path(report.root), Path(report.real_root), *config.hidden_frame_paths], report.home
        )

    async def _ensure_running(self) -> GatewayChannels:
        await self._boot()
        channels = self._channels
        if channels is not None and self._healthy(channels):
            return channels
        async with self._lifecycle:
            self._check_open()
            channels = self._channels
            if channels is not None and self._healthy(channels):
                return channels
            await self._recover()
            assert self._channels is not None
            return self._channels

    def _healthy(self, channels: GatewayChannels) -> bool:
        return not channels.closed and not channels.dead and channels.restarts == self._boot_restarts

    async def _recover(self) -> None:
        """Get a working kernel again after a death, a restart by the gateway or a lost websocket."""
        rest = self._require_rest()
        kernel_id = self._require_kernel_id()
        channels, self._channels = self._channels, None
        started = time.monotonic()
        if channels is not None:
            await channels.aclose()
        if channels is not None and channels.restarts != self._boot_restarts and not channels.dead:
            logger.warning(
                "the kernel died and the gateway restarted it; setting it up again (state is lost)"
            )
            self._generation += 1
            await self._connect_and_set_up(started)
            return
        if (channels is not None and channels.dead) or await rest.kernel_state(kernel_id) in (None, "dead"):
            logger.warning("the gateway lost the kernel; starting a new one (state is lost)")
            self._generation += 1
            await self._delete_kernel()
            await self._start_new_kernel()
            return
        # Only the websocket was lost: reconnect, and keep the state if the kernel kept it.
        try:
            fresh = await GatewayChannels.open(
                self.gateway, kernel_id, self.gateway.startup_timeout, output_limit=self.config.output_limit
            )
        except KernelError as exc:
            raise KernelStartError(str(exc)) from None
        self._channels = fresh
        self._boot_restarts = fresh.restarts
        await self._wait_ready(fresh, started)
        output = await self._collect(fresh, _shipping.status_code())
        if output.text.strip() != self._boot_id:
            logger.warning("reconnected to a kernel that lost its state; setting it up again")
            self._generation += 1
            await self._set_up(fresh)

    async def restart(self) -> None:
        """Restart the kernel through the gateway: all state is lost; the set-up is shipped again.

        An execution running at that moment ends with :class:`~ipybox_core.errors.KernelError`.
        """
        await self._boot()
        async with self._lifecycle:
            self._check_open()
            rest = self._require_rest()
            await self._settle_interrupts()
            channels, self._channels = self._channels, None
            self._generation += 1  # running executions see the change at once
            if channels is not None:
                await channels.aclose()
            started = time.monotonic()
            if await rest.restart(self._require_kernel_id(), self.gateway.startup_timeout):
                await self._connect_and_set_up(started)
            else:
                await self._start_new_kernel()

    async def shutdown(self, *, now: bool = False) -> None:
        """Close the websocket and delete the kernel on the gateway (it shuts the kernel down).

        ``now`` is accepted for compatibility; the gateway decides how the kernel stops. Idempotent;
        if cancelled or failing, the kernel is still deleted (synchronously) before returning.
        """
        if self._closed:
            return
        self._closed = True
        try:
            await self._discard()
        finally:
            self._finalizer()

    async def _discard(self) -> None:
        for task in list(self._interrupts):
            task.cancel()
        channels, self._channels = self._channels, None
        try:
            if channels is not None:
                await channels.aclose()
            await self._delete_kernel()
        finally:
            rest, self._rest = self._rest, None
            if rest is not None:
                with contextlib.suppress(Exception):
                    await rest.aclose()

    async def _delete_kernel(self) -> None:
        kernel_id = self._remote.kernel_id
        if kernel_id is None or self._rest is None:
            return
        try:
            await self._rest.delete(kernel_id)
        except KernelError as exc:
            logger.warning("could not delete kernel %s on the gateway: %s", kernel_id, exc)
        self._remote.kernel_id = None

    # --- state ------------------------------------------------------------------------------------

    @property
    def kernel_id(self) -> str | None:
        """The kernel's id on the gateway."""
        return self._remote.kernel_id

    @property
    def remote_root(self) -> str | None:
        """The kernel's private directory on its machine (first on its ``sys.path``)."""
        return self._remote_root

    @property
    def is_alive(self) -> bool:
        """Whether the kernel's websocket is open and the gateway reported no death since set-up."""
        channels = self._channels
        return not self._closed and channels is not None and self._healthy(channels)

    def _require_rest(self) -> GatewayRest:
        if self._rest is None:
            raise KernelError(
                "the gateway kernel is not started" if not self._closed else "the kernel is shut down"
            )
        return self._rest

    def _require_kernel_id(self) -> str:
        kernel_id = self._remote.kernel_id
        if kernel_id is None:
            raise KernelError("the gateway kernel has no kernel")
        return kernel_id

    # --- packages and environment ----------------------------------------------------------------

    def install_package(self, path: str, files: Mapping[str, str] | Path) -> None:
        """Make the package directory ``path`` (e.g. ``"mcptools/github"``) importable in the kernel,
        replacing an earlier one. ``files`` maps relative paths to text, or is a local directory to
        copy. Shipped before the next execution and again after every restart; missing parent
        packages get an empty ``__init__.py``."""
        path = _shipping.check_package_path(path)
        contents = _shipping.read_package_files(files) if isinstance(files, Path) else dict(files)
        self._packages[path] = contents
        self._unshipped[path] = contents

    def uninstall_package(self, path: str) -> None:
        """Remove a package installed with :meth:`install_package` (before the next execution)."""
        path = _shipping.check_package_path(path)
        self._packages.pop(path, None)
        self._unshipped[path] = None

    async def update_environment(
        self, env: Mapping[str, str] | None = None, python_path: Sequence[Path] = ()
    ) -> None:
        """Set environment variables and prepend ``sys.path`` entries (paths on the kernel's
        machine) in the running kernel, and after every restart."""
        env = dict(env or {})
        paths = [str(p) for p in python_path]
        self._env_overrides.update(env)
        self._extra_python_path.extend(p for p in paths if p not in self._extra_python_path)
        output = await self.run(_shipping.environment_code(env, paths), silent=True)
        if output.error is not None:
            raise KernelError(f"kernel bookkeeping failed: {output.error}")

    async def _ship_packages(self, channels: GatewayChannels) -> None:
        if not self._unshipped:
            return
        changes = dict(self._unshipped)
        output = await self._collect(channels, _shipping.sync_code(changes))
        if output.error is not None:
            raise KernelError(f"shipping packages into the gateway kernel failed: {output.error}")
        for path in changes:
            if self._unshipped.get(path) is changes[path]:
                del self._unshipped[path]

    # --- execution --------------------------------------------------------------------------------

    async def _transport(self) -> _GatewayTransport:
        channels = await self._ensure_running()
        await self._ship_packages(channels)
        return _GatewayTransport(self, channels)

    async def _collect(self, channels: GatewayChannels, code: str) -> ExecutionOutput:
        """Run bookkeeping code silently; a kernel that does not finish it within
        ``GatewayConfig.startup_timeout`` is an error (rather than a hang)."""
        collector = OutputCollector(self.config.output_limit)
        limit = self.gateway.startup_timeout
        loop = execute_loop(_GatewayTransport(self, channels), code, None, True, self._settings())
        try:
            async with asyncio.timeout(limit), aclosing(loop) as events:
                async for event in events:
                    collector.add(event)
        except TimeoutError:
            raise KernelError(
                f"the kernel on the gateway did not finish ipybox's set-up code within {limit:g} s"
            ) from None
        return collector.output()

    def _check_kernel(self, channels: GatewayChannels, generation: int) -> None:
        """Raise if the kernel serving an execution was replaced, died or became unreachable."""
        if generation != self._generation or self._closed:
            raise KernelError("the kernel was restarted or shut down while the code was running")
        if channels.restarts != self._boot_restarts:
            raise KernelDied(
                "the kernel died while running the code (the gateway restarted it); all its state is "
                "lost and the next execution starts from a fresh kernel"
            )
        if channels.dead:
            raise KernelDied(
                "the kernel died while running the code and the gateway could not restart it; the next "
                "execution starts a new kernel"
            )
        if channels.closed:
            raise KernelDied(
                f"lost the websocket to the kernel on the gateway while the code was running "
                f"({channels.lost}); the output of this execution is lost, and the next execution "
                "reconnects (state kept if the kernel survived) or starts a new kernel"
            )

    async def _check_gateway(self, channels: GatewayChannels, generation: int) -> None:
        """Ask the gateway whether it still has the kernel (it may have been culled or deleted)."""
        try:
            state = await self._require_rest().kernel_state(self._require_kernel_id())
        except KernelError as exc:
            logger.warning("cannot check the kernel's state on the gateway: %s", exc)
            return
        self._check_kernel(channels, generation)
        if state is None or state == "dead":
            await channels.aclose()
            raise KernelDied(
                f"the gateway reports the kernel {'gone' if state is None else 'dead'} while the code "
                "was running; all its state is lost and the next execution starts a new kernel"
            )

    # --- control ----------------------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Interrupt the running code (raises ``KeyboardInterrupt`` in it); no-op when idle.

        Idle means no execution of ours runs: an interrupt sent then could reach the kernel after the
        next execution started (control and shell are separate channels) and break that one.
        """
        self._check_open()
        if not self._busy:
            return
        channels = self._channels
        if channels is not None and self._healthy(channels):
            await self._send_interrupt(channels)

    async def _settle_interrupts(self) -> None:
        """Wait until the interrupts fired so far were delivered (each is one bounded request)."""
        if self._interrupts:
            await asyncio.gather(*self._interrupts, return_exceptions=True)

    def _fire_interrupt(self, channels: GatewayChannels) -> None:
        task = asyncio.create_task(self._send_interrupt(channels), name="ipybox-gateway-interrupt")
        self._interrupts.add(task)
        task.add_done_callback(self._interrupts.discard)

    async def _send_interrupt(self, channels: GatewayChannels) -> None:
        try:
            if self.config.interrupt_mode == "message":
                await channels.send("control", "interrupt_request", {})
            else:
                await self._require_rest().interrupt(self._require_kernel_id())
        except KernelError as exc:
            logger.warning("could not interrupt the kernel on the gateway: %s", exc)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("alive" if self.is_alive else "not running")
        return f"<GatewayKernel {self.kernel_id} on {self.gateway.url} {state}>"


class _GatewayTransport:
    """The execute loop's transport over the gateway's websocket (shell and iopub on one stream)."""

    restart_failures: tuple[type[Exception], ...] = (KernelError,)

    def __init__(self, kernel: GatewayKernel, channels: GatewayChannels) -> None:
        self._kernel = kernel
        self._channels = channels
        self._generation = kernel._generation
        self._replies: list[Message] = []
        self._liveness = _LivenessCheck(kernel.gateway.liveness_interval)
        self._open = True
        channels.listen(True)

    def _check(self) -> None:
        self._kernel._check_kernel(self._channels, self._generation)

    async def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        try:
            return await self._channels.send(channel, msg_type, content)
        except KernelError:
            self._check()  # the specific reason, if there is one
            raise

    async def output(self, timeout: float) -> Message | None:
        end = time.monotonic() + timeout
        while True:
            self._check()
            message = await self._channels.receive(max(0.0, end - time.monotonic()))
            if message is None or message["channel"] == "iopub":
                return message
            if message["channel"] == "shell":
                self._replies.append(message)  # the reply may overtake the output

    async def reply(self, timeout: float) -> Message | None:
        if self._replies:
            return self._replies.pop(0)
        end = time.monotonic() + timeout
        while True:
            self._check()
            message = await self._channels.receive(max(0.0, end - time.monotonic()))
            if message is None or message["channel"] == "shell":
                return message

    async def check(self) -> None:
        self._check()
        if self._liveness.due():
            await self._kernel._check_gateway(self._channels, self._generation)

    def interrupt(self) -> None:
        self._kernel._fire_interrupt(self._channels)

    async def settle(self) -> None:
        await self._kernel._settle_interrupts()

    def finish(self, *, abandoned: bool) -> None:
        if not self._open:
            return
        self._open = False
        channels = self._channels
        channels.listen(False)
        if abandoned and not channels.closed and self._kernel._healthy(channels):
            # The consumer stopped listening (break, cancellation): stop the code too.
            self._kernel._fire_interrupt(channels)

    async def restart(self) -> None:
        await self._kernel.restart()


class _LivenessCheck:
    """Says when the next REST check of the kernel's state is due."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next = time.monotonic() + interval

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.interval
        return True


def _check_config(config: KernelConfig) -> None:
    if config.launcher is not None:
        raise ConfigError(_SANDBOX_REFUSAL)
    unsupported = {
        "kernel_args": bool(config.kernel_args),
        "runtime_dir": config.runtime_dir is not None,
        "python": config.python != KernelConfig.python,
    }
    for name, given in unsupported.items():
        if given:
            raise ConfigError(
                f"KernelConfig.{name} does not apply to a kernel on a gateway: the gateway's kernel "
                "spec decides how the kernel is launched (choose one with GatewayConfig.kernel_name)"
            )
