"""The macOS backend: a Seatbelt profile (``sandbox-exec``) or sandbox-runtime settings from a policy.

**Not run on our CI** (Linux only): :class:`SeatbeltProfile` and :class:`SrtSettings` are
unit-tested as generated text; the rules follow what ``@anthropic-ai/sandbox-runtime`` 0.0.78
emits (``generateSandboxProfile``) and Seatbelt's last-matching-rule-wins evaluation. Differences
from Linux, by design of the platform:

* reads: the whole system is readable except user data (``/Users``, ``/private/var/root``,
  ``/Volumes``, other processes' temp dirs), then the allow-list (workspace, Python environment,
  ``allow_read``) is re-opened and hidden paths/names are denied on top. Seatbelt matches paths,
  so a hidden name also covers files created later (on Linux only files present at launch);
* no PID/IPC namespaces: other processes of the user are visible (``ps``) though not signalable
  (``signal (target same-sandbox)``); the network is cut by rules, not by a namespace;
* limits: ``RLIMIT_CPU``/``NOFILE``/``FSIZE`` apply; macOS does not enforce ``RLIMIT_DATA``
  (no memory limit) and ``RLIMIT_NPROC`` counts all processes of the user (not set); there are
  no cgroups and the private tmp dir is not size-limited.
"""

from __future__ import annotations

import json
import os
import shlex
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipybox_core.errors import ConfigError, SandboxError
from ipybox_core.kernel.launcher import InterruptMode, LaunchSpec
from ipybox_core.sandbox._command import boot_command, check_private_runtime_dir, sandbox_environment
from ipybox_core.sandbox._proxy import FilteringProxy, HostFilter
from ipybox_core.sandbox._pyenv import find_executable, python_environment_paths
from ipybox_core.sandbox.policy import SandboxPolicy
from ipybox_core.sandbox.probe import probe_sandbox

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
USER_DATA = ("/Users", "/private/var/root", "/Volumes", "/private/tmp", "/private/var/folders")
"""Denied for reading (then the allow-list is re-opened inside them)."""
_MACH_SERVICES = (
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.notification_center",
    "com.apple.system.logger",
    "com.apple.cfprefsd.daemon",
)
_REGEX_ESCAPES = {c: "\\" + c for c in ".^$+()[]{}|\\"}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/dtracehelper")


@dataclass(frozen=True)
class SeatbeltProfile:
    """A Seatbelt profile (SBPL) for ``sandbox-exec -p`` confining one kernel by ``policy``.

    ``runtime_dir`` holds the ipc sockets and the tool server's socket; ``tmp_dir`` is the
    kernel's private temp dir; ``python_paths`` the interpreter's prefixes and import paths;
    ``proxy_port`` the loopback port of the filtering proxy when ``allow_hosts`` is set;
    ``sockets`` further unix sockets the kernel may connect to (the tool server's).
    """

    policy: SandboxPolicy
    workspace: Path
    runtime_dir: Path
    tmp_dir: Path
    python_paths: Sequence[Path] = ()
    proxy_port: int | None = None
    sockets: Sequence[Path] = ()

    def render(self) -> str:
        """The profile text."""
        policy = self.policy
        readable, writable, hidden = _trees(
            policy, self.workspace, self.runtime_dir, self.tmp_dir, self.python_paths
        )
        hidden_filters = [_subpath(path) for path in hidden]
        hidden_filters += [_name_regex(name) for name in policy.hidden_names]
        lines = [
            "(version 1)",
            "(deny default)",
            ";; processes of this sandbox",
            "(allow process-exec process-fork)",
            "(allow signal (target same-sandbox))",
            "(allow process-info* (target same-sandbox))",
            "(allow sysctl-read)",
            "(allow ipc-posix-sem ipc-posix-shm)",
            "(allow mach-lookup " + " ".join(f'(global-name "{name}")' for name in _MACH_SERVICES) + ")",
            ";; reading: the system, not user data; then the allow-list; hidden paths last (last match wins)",
            "(allow file-read-metadata)",
            "(allow file-read*)",
            "(deny file-read* " + " ".join(_subpath(Path(path)) for path in USER_DATA) + ")",
            "(allow file-read* " + " ".join(_subpath(path) for path in readable) + ")",
            ";; writing: the workspace, the runtime directory, the private tmp dir, allow_write",
            "(allow file-write* " + " ".join(_subpath(path) for path in writable) + ")",
            "(allow file-write* " + " ".join(f'(literal "{device}")' for device in _DEVICES) + ")",
            "(allow file-ioctl " + " ".join(f'(literal "{device}")' for device in _DEVICES) + ")",
            "(deny file-read* file-write* " + " ".join(hidden_filters) + ")",
            ";; kernel channels and the tool server: unix sockets in the runtime directory only",
            "(allow system-socket (socket-domain AF_UNIX))",
            f"(allow network-bind network-inbound (local unix-socket {_subpath(self.runtime_dir)}))",
            f"(allow network-outbound (remote unix-socket {_subpath(self.runtime_dir)}))",
        ]
        for socket_path in self.sockets:
            literal = f"(literal {_quote(_real(socket_path))})"
            lines.append(f"(allow file-read* {literal})")
            lines.append(f"(allow network-outbound (remote unix-socket {literal}))")
        if policy.network:
            lines += [";; network=True: the host's network", "(allow network* system-socket)"]
            lines.append('(allow mach-lookup (global-name "com.apple.dnssd.service"))')
        elif self.proxy_port is not None:
            lines += [
                ";; allow_hosts: only the filtering proxy on the host's loopback",
                "(allow system-socket (socket-domain AF_INET) (socket-domain AF_INET6))",
                f'(allow network-outbound (remote ip "localhost:{self.proxy_port}"))',
            ]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SrtSettings:
    """``@anthropic-ai/sandbox-runtime`` settings (``srt --settings file -c 'command'``) for ``policy``.

    srt runs its own filtering proxy for ``allowedDomains``; on macOS it uses Seatbelt. Only the
    runtime directory's unix sockets are allowed (the kernel's channels and the tool server).
    ``network=True`` cannot be expressed (srt always filters): it raises :class:`ConfigError`.
    """

    policy: SandboxPolicy
    workspace: Path
    runtime_dir: Path
    tmp_dir: Path
    python_paths: Sequence[Path] = ()

    def to_dict(self) -> dict[str, Any]:
        policy = self.policy
        if policy.network:
            raise ConfigError("sandbox-runtime always filters the network: network=True has no srt form")
        readable, writable, hidden_paths = _trees(
            policy, self.workspace, self.runtime_dir, self.tmp_dir, self.python_paths
        )
        hidden = [str(path) for path in hidden_paths] + [f"**/{name}" for name in policy.hidden_names]
        return {
            "filesystem": {
                "denyRead": [*USER_DATA, *hidden],
                "allowRead": [_real(path) for path in readable],
                "allowWrite": [_real(path) for path in writable],
                "denyWrite": hidden,
            },
            "network": {
                "allowedDomains": list(policy.allow_hosts),
                "deniedDomains": [],
                "allowUnixSockets": [_real(self.runtime_dir)],
                "allowLocalBinding": False,
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @staticmethod
    def command(settings_file: Path, argv: Sequence[str], *, srt: str = "srt") -> list[str]:
        """The srt invocation: srt joins its arguments into a shell string, so pass one quoted string."""
        return [srt, "--settings", str(settings_file), "-c", shlex.join(argv)]


class SeatbeltLauncher:
    """A :class:`~ipybox_core.kernel.launcher.KernelLauncher` running kernels under ``sandbox-exec``.

    Untested on CI (see the module docstring). Interrupts go by message, like on Linux.
    """

    def __init__(
        self,
        policy: SandboxPolicy,
        *,
        workspace: str | os.PathLike[str],
        sockets: Sequence[str | os.PathLike[str]] = (),
        probe: bool = True,
    ) -> None:
        if probe:
            probe_sandbox()
        self.policy = policy
        self.workspace = Path(workspace).absolute()
        self.sockets = tuple(Path(path).absolute() for path in sockets)
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {self.workspace} is not a directory")
        self._proxies: dict[Path, FilteringProxy] = {}
        self._finalizer = weakref.finalize(self, _close_all, self._proxies)

    @property
    def interrupt_mode(self) -> InterruptMode:
        return "message"

    def close(self) -> None:
        self._finalizer()

    def profile(self, spec: LaunchSpec) -> SeatbeltProfile:
        """The profile :meth:`wrap` applies to ``spec`` (creates the private tmp and home dirs)."""
        tmp_dir = spec.runtime_dir / "tmp"
        tmp_dir.mkdir(mode=0o700, exist_ok=True)
        python: list[Path] = []
        executable = find_executable(spec.argv[0], spec.env) if spec.argv else None
        if self.policy.python_env and executable is not None:
            found = python_environment_paths(executable, spec.env)
            python = [*found.prefixes, *found.extra]
        port = self._proxy_port(spec.runtime_dir) if self.policy.allow_hosts else None
        return SeatbeltProfile(
            self.policy, self.workspace, spec.runtime_dir, tmp_dir, python, port, self.sockets
        )

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        check_private_runtime_dir(spec)
        profile = self.profile(spec)
        home = spec.runtime_dir / "home"
        home.mkdir(mode=0o700, exist_ok=True)
        proxy_url = f"http://127.0.0.1:{profile.proxy_port}" if profile.proxy_port else None
        env = sandbox_environment(
            spec.env, home=str(home), tmp=str(profile.tmp_dir), backend="seatbelt", proxy_url=proxy_url
        )
        command = boot_command(spec, self.policy.limits, process_limit=False)
        argv = [SANDBOX_EXEC, "-p", profile.render(), *command]
        return LaunchSpec(argv=argv, env=env, cwd=spec.cwd, runtime_dir=spec.runtime_dir)

    def _proxy_port(self, runtime_dir: Path) -> int:
        proxy = self._proxies.get(runtime_dir)
        if proxy is None or not proxy.running:
            proxy = FilteringProxy(HostFilter(self.policy.allow_hosts), alive=runtime_dir.exists)
            self._proxies[runtime_dir] = proxy
        assert proxy.port is not None
        return proxy.port


def _trees(
    policy: SandboxPolicy, workspace: Path, runtime_dir: Path, tmp_dir: Path, python_paths: Sequence[Path]
) -> tuple[list[Path], list[Path], list[Path]]:
    """(readable, writable, hidden) paths of ``policy``; writable paths are readable too."""
    writable = [workspace, runtime_dir, tmp_dir, *(policy.expand(p, workspace) for p in policy.allow_write)]
    readable = [*python_paths, *(policy.expand(p, workspace) for p in policy.allow_read), *writable]
    hidden = [policy.expand(path, workspace) for path in policy.all_hidden_paths()]
    return _unique(readable), _unique(writable), _unique(hidden)


def _close_all(proxies: dict[Path, FilteringProxy]) -> None:
    for proxy in proxies.values():
        proxy.close()
    proxies.clear()


def _real(path: Path) -> str:
    """Seatbelt matches resolved paths (``/tmp`` is ``/private/tmp``)."""
    return os.path.realpath(path)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _subpath(path: Path) -> str:
    return f"(subpath {_quote(_real(path))})"


def _name_regex(pattern: str) -> str:
    """A file-name glob as an SBPL regex matching that name in any directory."""
    body = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else _REGEX_ESCAPES.get(c, c) for c in pattern)
    return f'(regex #"/{body}$")'


def _unique(paths: Sequence[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
