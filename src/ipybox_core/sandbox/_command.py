"""What both backends put inside the sandbox: the bootstrapped kernel command and its environment."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ipybox_core.errors import SandboxError
from ipybox_core.inkernel import _sandbox_boot
from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox._pyenv import find_executable, without_dotdot
from ipybox_core.sandbox.policy import ResourceLimits

DROPPED_ENV = frozenset(
    {
        "JPY_PARENT_PID",  # ipykernel would poll a parent pid that the PID namespace hides, and exit
        "JPY_INTERRUPT_EVENT",
        "IPY_INTERRUPT_EVENT",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "TMP",
        "TEMP",
    }
)
"""Variables never passed into the sandbox: pointers to host services and parent-process plumbing."""

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_OPTIONS_WITH_VALUE = frozenset({"-X", "-W"})


_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy")


def sandbox_environment(
    env: Mapping[str, str], *, home: str, tmp: str, backend: str, proxy_url: str | None = None
) -> dict[str, str]:
    """The kernel's environment inside the sandbox: ``env`` without :data:`DROPPED_ENV`, own HOME/TMPDIR.

    With ``proxy_url`` (``allow_hosts``), every HTTP(S) proxy variable points to it.
    """
    inside = {key: value for key, value in env.items() if key not in DROPPED_ENV}
    inside["HOME"] = home
    inside["TMPDIR"] = tmp
    inside["IPYBOX_SANDBOX"] = backend
    if proxy_url is not None:
        for name in _NO_PROXY_VARIABLES:
            inside.pop(name, None)
        inside.update(dict.fromkeys(_PROXY_VARIABLES, proxy_url))
    return inside


def rlimits(limits: ResourceLimits, *, process_limit: bool) -> dict[str, list[int]]:
    """``setrlimit`` values (soft, hard) for ``limits``; ``RLIMIT_NPROC`` only if ``process_limit``."""
    values: dict[str, list[int]] = {}
    if limits.memory_mb is not None:
        values["RLIMIT_DATA"] = [limits.memory_mb * 2**20] * 2
    if limits.cpu_seconds is not None:
        values["RLIMIT_CPU"] = [limits.cpu_seconds, limits.cpu_seconds + limits.cpu_grace_seconds]
    if limits.open_files is not None:
        values["RLIMIT_NOFILE"] = [limits.open_files] * 2
    if limits.file_size_mb is not None:
        values["RLIMIT_FSIZE"] = [limits.file_size_mb * 2**20] * 2
    if limits.max_processes is not None and process_limit:
        values["RLIMIT_NPROC"] = [limits.max_processes] * 2
    return values


def boot_command(
    spec: LaunchSpec,
    limits: ResourceLimits,
    *,
    process_limit: bool,
    proxy: tuple[int, str] | None = None,
    user: tuple[int, str, str] | None = None,
) -> list[str]:
    """``spec.argv`` run through the bootstrap (:mod:`ipybox_core.inkernel._sandbox_boot`), which
    applies ``limits`` first.

    ``proxy`` (port, unix socket path) starts the in-sandbox forwarder to the host's filtering proxy.
    ``user`` (uid, home, working directory) makes the bootstrap switch to that uid first, then
    enter the directory (see :mod:`._userns`).

    ``python [options] -m module ...`` runs the module in the same interpreter (so the CPU-budget
    handler stays installed); anything else is ``exec``-ed by this interpreter (:data:`sys.executable`).
    """
    config = json.dumps(
        {
            "rlimits": rlimits(limits, process_limit=process_limit),
            "cpu_seconds": limits.cpu_seconds,
            "cpu_grace_seconds": limits.cpu_grace_seconds,
            "proxy": {"port": proxy[0], "socket": proxy[1]} if proxy else None,
            "user": {"uid": user[0], "home": user[1], "cwd": user[2]} if user else None,
        },
        separators=(",", ":"),
    )
    argv = list(spec.argv)
    module_at = module_index(argv)
    if module_at is not None:
        python = find_executable(argv[0], spec.env)  # bwrap runs the path as given: no ".." in it
        return [str(python or argv[0]), *argv[1:module_at], "-c", boot_source(), config, *argv[module_at:]]
    program = find_executable(argv[0], spec.env) if argv else None
    if program is None:
        raise SandboxError(f"cannot find the kernel program {argv[:1]!r} on the launch PATH")
    interpreter = str(without_dotdot(Path(sys.executable)))
    return [interpreter, "-c", boot_source(), config, "--exec", str(program), *argv[1:]]


def check_private_runtime_dir(spec: LaunchSpec) -> None:
    """Refuse a runtime directory that holds another kernel's connection file.

    The runtime directory is visible (read-write) in the sandbox: another kernel's connection file
    there would hand its key, and so control of that kernel, to the sandboxed code.
    """
    argv = list(spec.argv)
    own = Path(argv[argv.index("-f") + 1]).absolute() if "-f" in argv[:-1] else None
    try:
        others = [path for path in spec.runtime_dir.glob("*.json") if path.absolute() != own]
    except OSError:
        return
    if others:
        raise SandboxError(
            f"the runtime directory {spec.runtime_dir} also holds {others[0].name}, another kernel's "
            "connection file; the sandboxed kernel could use its key to run code in that kernel. Give "
            "each sandboxed kernel its own runtime directory (KernelConfig.runtime_dir=None)."
        )


def module_index(argv: Sequence[str]) -> int | None:
    """Index of ``-m`` when ``argv`` is ``python [options] -m module ...``, else ``None``."""
    if not argv or not _PYTHON_NAME.match(Path(argv[0]).name):
        return None
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return i if i + 1 < len(argv) else None
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
        elif arg.startswith("-") and arg not in ("-c", "-", "--"):
            i += 1
        else:
            return None
    return None


@functools.cache
def boot_source() -> str:
    """The bootstrap's source, passed to ``python -c``."""
    return Path(_sandbox_boot.__file__).read_text(encoding="utf-8")
