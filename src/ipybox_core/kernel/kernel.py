"""A stateful IPython kernel: start, execute with streamed events, interrupt, restart, shut down."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipybox_core
from ipybox_core.errors import ConfigError, KernelDied, KernelError, KernelStartError
from ipybox_core.kernel._base import KernelBase
from ipybox_core.kernel._channels import CHANNELS, KernelChannels
from ipybox_core.kernel._ipc_paths import PinnedSockets, PlantedPath, SocketNotReady, sockets_ready
from ipybox_core.kernel._launch import (
    ConnectionInfo,
    KernelFiles,
    kernel_argv,
    kernel_environment,
    prepare_runtime_dir,
    wrap_off_loop,
    write_bootstrap,
    write_connection_file,
)
from ipybox_core.kernel._process import KernelProcess, OutputTail, _ProcStat
from ipybox_core.kernel._stream_limit import max_iopub_frame_bytes
from ipybox_core.kernel._text import strip_ansi
from ipybox_core.kernel._traceback import hidden_path_prefixes
from ipybox_core.kernel._transport import Channel, Message
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.launcher import InterruptMode, LaunchSpec

logger = logging.getLogger(__name__)

_PACKAGE_DIR = Path(ipybox_core.__file__).parent
_LOG_TAIL_CHARS = 3000
_INTERRUPT_REPLY_WAIT = 5.0  # seconds; a kernel too busy to answer gets the interrupt anyway
_EXIT_CODE = (
    "(lambda shell, gc, os: (shell.reset(new_session=False), gc.collect(), os._exit(0)))"
    "(get_ipython(), __import__('gc'), __import__('os'))"
)


@dataclass(eq=False)
class _Incarnation:
    """One kernel process and the channels to it; a restart creates a new incarnation."""

    process: KernelProcess
    channels: KernelChannels
    connection: ConnectionInfo
    generation: int
    files: KernelFiles
    in_use: bool = False
    """An execution is reading from the channels (they must not be closed under it)."""
    retired: bool = False
    """Replaced or shut down; the execution using it closes the channels when it ends."""
    known_descendants: list[_ProcStat] = field(default_factory=list)


@dataclass(eq=False)
class _Resources:
    """What must be released even if the Kernel object is dropped without shutdown()."""

    files: KernelFiles | None = None
    incarnation: _Incarnation | None = None


def _discard(incarnation: _Incarnation) -> None:
    incarnation.process.kill(incarnation.known_descendants)
    incarnation.retired = True
    if not incarnation.in_use:
        incarnation.channels.close()
    incarnation.files.remove_process_files(incarnation.generation)  # a killed kernel leaves them


async def _discard_off_loop(incarnation: _Incarnation) -> None:
    """:func:`_discard`, its slow part in a worker thread: finding the process tree (the host's
    whole process table) and reaping take 0.1 s on a busy host, a stall for every other kernel and
    session on the event loop. Cancelled meanwhile, it finishes on the loop."""
    try:
        await asyncio.shield(asyncio.to_thread(incarnation.process.kill, incarnation.known_descendants))
    finally:
        _discard(incarnation)  # the process part is done (kill is idempotent); channels and files


def _release(resources: _Resources) -> None:
    """Kill the kernel and everything it started, remove the runtime directory. Synchronous."""
    incarnation, resources.incarnation = resources.incarnation, None
    if incarnation is not None:
        _discard(incarnation)
    files, resources.files = resources.files, None
    if files is not None:
        files.remove()


class Kernel(KernelBase):
    """A stateful IPython kernel in its own process (ipc transport, private runtime directory).

    Start it with ``kernel = await Kernel.start(config)`` or ``async with Kernel(config) as kernel``
    (also ``async with await Kernel.start(config)``); an unstarted kernel starts on first use.
    Always end it with :meth:`shutdown` (the ``async with`` block does): that kills the kernel and
    every process it started and removes the runtime directory. As a last resort this also happens
    when the object is garbage collected or the interpreter exits.

    One execution runs at a time; starting a second while one runs raises
    :class:`~ipybox_core.errors.ExecutorBusy`.
    """

    def __init__(self, config: KernelConfig | None = None) -> None:
        super().__init__(config)
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _release, self._resources)
        self._cwd = Path()
        self._env_overrides: dict[str, str] = {}
        self._extra_python_path: list[Path] = []
        self._output: OutputTail | None = None

    # --- lifecycle --------------------------------------------------------------------------------

    @classmethod
    async def start(cls, config: KernelConfig | None = None) -> Kernel:
        """Start a kernel and wait until it is ready to execute code.

        Raises :class:`~ipybox_core.errors.KernelStartError` (with the kernel's log) if it does not
        come up within ``config.startup_timeout``.
        """
        kernel = cls(config)
        await kernel._boot()
        return kernel

    async def _boot(self) -> None:
        self._check_open()
        if self._started:
            return
        async with self._lifecycle:
            if self._started:
                return
            cwd = (self.config.cwd or Path.cwd()).absolute()
            if not cwd.is_dir():
                raise ConfigError(f"the kernel's working directory {cwd} does not exist")
            self._cwd = cwd
            files = prepare_runtime_dir(self.config.runtime_dir)
            self._resources.files = files
            home = self.config.env.get("HOME", os.environ.get("HOME"))
            self._hidden_prefixes = hidden_path_prefixes(
                [_PACKAGE_DIR, files.bootstrap.parent, *self.config.hidden_frame_paths], home
            )
            try:
                await self._launch()
            except BaseException:
                self._closed = True
                self._finalizer()
                raise
            self._started = True

    async def _launch(self) -> _Incarnation:
        """Start a kernel process in the runtime directory and wait until it is ready."""
        files = self._files
        generation = self._generation + 1
        connection = write_connection_file(files, generation)
        bootstrap = write_bootstrap(files, self.config, self._cwd)
        env = kernel_environment(
            self.config,
            files,
            generation,
            overrides=self._env_overrides,
            extra_python_path=self._extra_python_path,
        )
        spec = LaunchSpec(
            argv=kernel_argv(self.config, files.connection_file, bootstrap),
            env=env,
            cwd=self._cwd,
            runtime_dir=files.runtime_dir,
            ipc_dir=files.ipc_dir(generation),
            kernel_files=(files.connection_file, bootstrap),
        )
        try:
            if self.config.launcher is not None:
                spec = await wrap_off_loop(self.config.launcher, spec)
                spec = dataclasses.replace(
                    spec, env={k: v for k, v in spec.env.items() if k != "JPY_PARENT_PID"}
                )
            process = KernelProcess(spec.argv, env=spec.env, cwd=spec.cwd, pass_fds=spec.pass_fds)
        except OSError as exc:
            files.remove_process_files(generation)
            raise KernelStartError(f"cannot launch the kernel ({spec.argv[0]}): {exc}") from exc
        except BaseException:
            files.remove_process_files(generation)
            raise
        self._generation = generation
        self._output = process.output
        try:
            pinned = await self._wait_for_sockets(process, connection)
        except BaseException:
            process.kill()
            files.remove_process_files(generation)
            raise
        channels = KernelChannels(
            connection, pinned, max_message_bytes=max_iopub_frame_bytes(self.config.output_limit)
        )
        incarnation = _Incarnation(process, channels, connection, generation, files)
        self._resources.incarnation = incarnation
        try:
            await self._wait_ready(incarnation)
        except BaseException:
            self._resources.incarnation = None
            _discard(incarnation)
            raise
        files.remove_start_files()  # read by the kernel; the host keeps what it needs in memory
        return incarnation

    async def _wait_for_sockets(self, process: KernelProcess, connection: ConnectionInfo) -> PinnedSockets:
        """Wait until the new kernel has bound its sockets, then open them (see ``_ipc_paths``)."""
        paths = [connection.socket_path(channel) for channel in CHANNELS]
        deadline = time.monotonic() + self.config.startup_timeout
        delay = 0.002
        while True:
            if sockets_ready(paths):
                try:
                    return PinnedSockets(paths)
                except SocketNotReady:  # replaced between the two looks: look again
                    pass
                except PlantedPath as exc:
                    raise KernelStartError(
                        f"the kernel's socket directory was tampered with: {exc}"
                    ) from None
            exit_code = process.exit_code()
            if exit_code is not None:
                raise KernelStartError(
                    f"the kernel exited during start-up ({_describe_exit(exit_code)})"
                    + self._log_tail_section(wait=2.0)
                )
            if time.monotonic() > deadline:
                raise KernelStartError(
                    f"the kernel did not become ready within {self.config.startup_timeout:g} s"
                    + self._log_tail_section()
                )
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.02)

    async def _wait_ready(self, incarnation: _Incarnation) -> None:
        """Wait for a kernel_info reply on shell and for the iopub subscription to be live."""
        timeout = self.config.startup_timeout
        channels = incarnation.channels
        started = last_request = time.monotonic()
        channels.send(channels.shell, "kernel_info_request", {})
        replied = subscribed = False
        while True:
            if not replied:
                reply = await channels.receive(channels.shell, 0.05)
                replied = reply is not None and reply["msg_type"] == "kernel_info_reply"
            if not subscribed:  # any iopub message: ipykernel >= 7 welcomes each subscriber
                subscribed = await channels.receive(channels.iopub, 0.05 if replied else 0) is not None
            if replied and subscribed:
                return
            exit_code = incarnation.process.exit_code()
            if exit_code is not None:
                raise KernelStartError(
                    f"the kernel exited during start-up ({_describe_exit(exit_code)})"
                    + self._log_tail_section(wait=2.0)
                )
            now = time.monotonic()
            if now - started > timeout:
                raise KernelStartError(
                    f"the kernel did not become ready within {timeout:g} s" + self._log_tail_section()
                )
            if replied and now - last_request > 0.5:
                # iopub subscriptions are not acknowledged by old kernels: provoke status messages
                channels.send(channels.shell, "kernel_info_request", {})
                last_request = now

    async def _ensure_running(self) -> _Incarnation:
        await self._boot()
        incarnation = self._resources.incarnation
        if incarnation is not None and incarnation.process.alive:
            return incarnation
        async with self._lifecycle:
            self._check_open()
            incarnation = self._resources.incarnation
            if incarnation is not None and incarnation.process.alive:
                return incarnation
            if incarnation is not None:
                logger.warning("the kernel died while idle; starting a fresh one (state is lost)")
                self._resources.incarnation = None
                await _discard_off_loop(incarnation)
            return await self._launch()

    async def restart(self) -> None:
        """Replace the kernel process with a fresh one: all state is lost, the runtime directory kept.

        An execution running at that moment ends with :class:`~ipybox_core.errors.KernelError`.
        """
        await self._boot()
        async with self._lifecycle:
            self._check_open()
            incarnation, self._resources.incarnation = self._resources.incarnation, None
            if incarnation is not None:
                await _discard_off_loop(incarnation)
            await self._launch()

    def relocate(self, config: KernelConfig) -> None:
        """Start later kernel processes (restarts, the replacement of a dead one) with ``config``.

        For a workspace renamed under the running kernel, which keeps its working directory (and a
        sandbox its binds: both follow the directory, not its name).
        """
        self.config = config
        self._cwd = (config.cwd or Path.cwd()).absolute()

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel and every process it started; remove the runtime directory.

        An idle kernel first gets ``config.shutdown_grace`` seconds to exit cleanly (so that files
        the code left open are flushed); ``now=True`` or a busy kernel is killed right away.
        Idempotent; cancelling it still kills everything.
        """
        if self._closed:
            return
        self._closed = True
        incarnation = self._resources.incarnation
        try:
            if incarnation is not None and not now and not self._busy and incarnation.process.alive:
                await self._stop_politely(incarnation)
        finally:
            self._finalizer()

    async def _stop_politely(self, incarnation: _Incarnation) -> None:
        # Remembered now: once the kernel exited, its children are re-parented and untraceable.
        incarnation.known_descendants = incarnation.process.descendants()
        channels = incarnation.channels
        # Not a shutdown_request: ipykernel 7's shutdown sometimes deadlocks (the control thread
        # flushes into the already stopped iopub thread). Dropping the user namespace finalises
        # the code's objects (open files get flushed), then the process ends.
        channels.send(
            channels.shell,
            "execute_request",
            {"code": _EXIT_CODE, "silent": True, "store_history": False, "allow_stdin": False},
        )
        deadline = time.monotonic() + self.config.shutdown_grace
        while incarnation.process.alive and time.monotonic() < deadline:  # noqa: ASYNC110 - polls a pid
            await asyncio.sleep(0.02)

    # --- state ------------------------------------------------------------------------------------

    @property
    def _files(self) -> KernelFiles:
        if self._resources.files is None:
            raise KernelError("the kernel is shut down" if self._closed else "the kernel is not started")
        return self._resources.files

    @property
    def runtime_dir(self) -> Path:
        """The kernel's runtime directory (connection file, ipc socket directories), mode 0700.

        A private directory removed at shutdown, or ``config.runtime_dir`` if given (kept).
        """
        return self._files.runtime_dir

    def log_tail(self) -> str:
        """The last output the current (or last) kernel process wrote to its stdout and stderr."""
        if self._output is None:
            return ""
        text, _ = self._output.text()
        return strip_ansi(text)

    @property
    def is_alive(self) -> bool:
        """Whether the kernel process is running."""
        incarnation = self._resources.incarnation
        return incarnation is not None and not self._closed and incarnation.process.alive

    @property
    def pid(self) -> int | None:
        """Process id of the kernel (or of the launcher's wrapper around it)."""
        incarnation = self._resources.incarnation
        return incarnation.process.pid if incarnation is not None else None

    @property
    def interrupt_mode(self) -> InterruptMode:
        return self.config.effective_interrupt_mode

    # --- execution --------------------------------------------------------------------------------

    async def _transport(self) -> _LocalTransport:
        return _LocalTransport(self, await self._ensure_running())

    async def _check_incarnation(self, incarnation: _Incarnation) -> None:
        """Raise if the kernel serving an execution was replaced or died."""
        if incarnation.retired or incarnation.generation != self._generation:
            raise KernelError("the kernel was restarted or shut down while the code was running")
        exit_code = incarnation.process.exit_code()
        if exit_code is None:
            return
        if self._resources.incarnation is incarnation:
            self._resources.incarnation = None
        tail = await asyncio.to_thread(self._log_tail_section, 2.0)  # waits for the last writes
        await _discard_off_loop(incarnation)
        raise KernelDied(
            f"the kernel died while running the code ({_describe_exit(exit_code)}); all its state is "
            "lost and the next execution starts a fresh kernel" + tail,
            exit_code=exit_code,
        )

    def install_package(self, path: str, files: Mapping[str, str] | Path) -> None:
        """Nothing to ship: a local kernel imports generated packages from ``config.python_path``."""

    def uninstall_package(self, path: str) -> None:
        """Nothing to remove: see :meth:`install_package`."""

    # --- control ----------------------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Interrupt the running code (raises ``KeyboardInterrupt`` in it); no-op when idle.

        Returns once the kernel has the interrupt (in ``"message"`` mode: its reply), so that code
        started right after is not the one interrupted.
        """
        self._check_open()
        incarnation = self._resources.incarnation
        if incarnation is not None and incarnation.process.alive:
            request = self._send_interrupt(incarnation)
            if request is not None:
                await self._interrupt_replied(incarnation, request)

    def _send_interrupt(self, incarnation: _Incarnation) -> str | None:
        """Send the interrupt; the ``interrupt_request``'s id in ``"message"`` mode."""
        if self.interrupt_mode != "message":
            incarnation.process.interrupt_group()  # delivered when sent
            return None
        channels = incarnation.channels
        if channels.closed:
            return None
        return channels.send(channels.control, "interrupt_request", {})

    async def _interrupt_replied(self, incarnation: _Incarnation, request: str) -> None:
        """Wait (up to :data:`_INTERRUPT_REPLY_WAIT` seconds) for the reply to ``request``: the
        kernel sends it after signalling itself. Other control replies are dropped on the way."""
        channels = incarnation.channels
        deadline = time.monotonic() + _INTERRUPT_REPLY_WAIT
        while not channels.closed and (remaining := deadline - time.monotonic()) > 0:
            reply = await channels.receive(channels.control, remaining)
            if reply is None or reply.get("parent_header", {}).get("msg_id") == request:
                return

    async def update_environment(
        self, env: Mapping[str, str] | None = None, python_path: Sequence[Path] = ()
    ) -> None:
        """Set environment variables and prepend ``sys.path`` entries in the running kernel.

        They are remembered and applied to every later restart too (e.g. the tool server's
        address, which is only known once :attr:`runtime_dir` exists).
        """
        env = dict(env or {})
        paths = [str(Path(p).absolute()) for p in python_path]
        self._env_overrides.update(env)
        self._extra_python_path.extend(Path(p) for p in paths if Path(p) not in self._extra_python_path)
        code = (
            f"__import__('os').environ.update({env!r})\n"
            f"__import__('sys').path[:0] = [p for p in {paths!r} if p not in __import__('sys').path]\n"
        )
        await self._run_silently(code)

    async def _run_silently(self, code: str) -> None:
        output = await self.run(code, silent=True)
        if output.error is not None:
            raise KernelError(f"kernel bookkeeping failed: {output.error}")

    # --- helpers ----------------------------------------------------------------------------------

    def _log_tail_section(self, wait: float = 0.0) -> str:
        tail = _log_tail(self._output, wait) if self._output is not None else ""
        return f"\n--- kernel log (last lines) ---\n{tail}" if tail else ""

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("alive" if self.is_alive else "not running")
        return f"<Kernel pid={self.pid} {state}>"


class _LocalTransport:
    """The execute loop's transport over one incarnation's ZMQ channels."""

    restart_failures: tuple[type[Exception], ...] = (KernelStartError,)

    def __init__(self, kernel: Kernel, incarnation: _Incarnation) -> None:
        self._kernel = kernel
        self._incarnation = incarnation
        self._channels = incarnation.channels
        incarnation.in_use = True

    async def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        socket = self._channels.shell if channel == "shell" else self._channels.control
        return self._channels.send(socket, msg_type, content)

    async def output(self, timeout: float) -> Message | None:
        return await self._channels.receive(self._channels.iopub, timeout)

    async def reply(self, timeout: float) -> Message | None:
        return await self._channels.receive(self._channels.shell, timeout)

    async def check(self) -> None:
        await self._kernel._check_incarnation(self._incarnation)

    def interrupt(self) -> None:
        self._kernel._send_interrupt(self._incarnation)

    async def settle(self) -> None:
        """Interrupts are delivered when sent (a signal, or a message on the control socket)."""

    def finish(self, *, abandoned: bool) -> None:
        incarnation = self._incarnation
        if not incarnation.in_use:
            return
        incarnation.in_use = False
        if incarnation.retired:
            incarnation.channels.close()
        elif abandoned and incarnation.process.alive:
            # The consumer stopped listening (break, cancellation): stop the code too.
            self._kernel._send_interrupt(incarnation)

    async def restart(self) -> None:
        await self._kernel.restart()


def _log_tail(output: OutputTail, wait: float) -> str:
    raw, dropped = output.text(wait)
    text = strip_ansi(raw[-_LOG_TAIL_CHARS:])
    if (dropped or len(raw) > _LOG_TAIL_CHARS) and "\n" in text:
        text = text.split("\n", 1)[1]
    return text.strip()


def _describe_exit(exit_code: int) -> str:
    if exit_code >= 0:
        if exit_code > 128 and exit_code - 128 in signal.valid_signals():
            # a wrapper (shell, sandbox) reports its child's signal as 128 + signum
            return f"exit code {exit_code}: {_signal_text(exit_code - 128)}"
        return f"exit code {exit_code}"
    return f"exit code {exit_code}: {_signal_text(-exit_code)}"


def _signal_text(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"killed by signal {signum}"
    hints = {
        "SIGKILL": " (killed, e.g. by the out-of-memory killer or a resource limit)",
        "SIGSEGV": " (segmentation fault in native code)",
        "SIGABRT": " (aborted)",
        "SIGXCPU": " (CPU time limit exceeded)",
    }
    return f"killed by {name}{hints.get(name, '')}"
