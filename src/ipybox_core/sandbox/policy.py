"""What a sandboxed kernel may see and do: :class:`SandboxPolicy` and :class:`ResourceLimits`.

The policy is an allow-list. The kernel sees the system directories, its Python environment, the
workspace, the kernel's runtime directory and the extra paths the policy names, nothing else; it
writes only to the workspace, the runtime directory, a private size-limited ``/tmp`` and the extra
writable paths. Secrets that live *inside* those trees (``.env`` files in the workspace, ``~/.ssh``
when the home directory is allowed, ``/etc/shadow``) are hidden on top.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ipybox_core.errors import ConfigError

DEFAULT_SYSTEM_PATHS: tuple[Path, ...] = tuple(
    Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
)
"""Read-only system directories (missing ones are skipped; top-level symlinks are recreated)."""

DEFAULT_HIDDEN_PATHS: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.gnupg",
    "~/.azure",
    "~/.kube",
    "~/.docker",
    "~/.config/gh",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.local/state/ipybox",  # OAuth tokens of MCP servers (ipybox_core.mcp.oauth_store)
    "~/.netrc",
    "~/.npmrc",
    "~/.pypirc",
    "~/.git-credentials",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
)
"""Paths hidden even when they lie inside a visible tree (``~`` is the policy's ``home``)."""

DEFAULT_HIDDEN_NAMES: tuple[str, ...] = (
    ".env",
    ".env.*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
)
"""File-name patterns hidden anywhere in the workspace and the extra allowed paths (at launch)."""
DEFAULT_HIDDEN_SCAN_ENTRIES = 1_000_000
"""Entries a launch's scan for hidden files visits at most (all user trees together)."""
DEFAULT_HIDDEN_SCAN_SECONDS = 60.0
"""Seconds a launch's scan for hidden files may take at most."""

_HOST_PATTERN = re.compile(r"^(\*\.)?[A-Za-z0-9.-]+(:\d{1,5})?$")


class ResourceLimits(BaseModel):
    """Resource limits of the sandboxed kernel and every process it starts.

    ``memory_mb`` is a per-process limit (``RLIMIT_DATA``): an allocation past it raises
    ``MemoryError`` in the cell and the kernel lives on. ``total_memory_mb`` caps the whole sandbox
    (all processes plus its ``/tmp``) through a memory cgroup where one can be created; past it the
    OOM killer stops the kernel. ``cpu_seconds`` is a *lifetime* CPU budget of each process: when it
    is used up a ``CpuTimeLimitExceeded`` (a ``TimeoutError``) is raised in the running cell, and
    ``cpu_grace_seconds`` of CPU later the kernel is killed. ``max_processes`` bounds processes and
    threads (pids cgroup, or ``RLIMIT_NPROC`` when not running as root). ``file_size_mb`` is the
    largest file the code may write anywhere (``OSError: File too large``); ``tmp_size_mb`` the size
    of the private ``/tmp`` and ``/dev/shm``. ``None`` switches a limit off.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: PositiveInt | None = 4096
    total_memory_mb: PositiveInt | None = None
    cpu_seconds: PositiveInt | None = None
    cpu_grace_seconds: PositiveInt = 10
    max_processes: PositiveInt | None = 512
    open_files: PositiveInt | None = 4096
    file_size_mb: PositiveInt | None = 2048
    tmp_size_mb: PositiveInt | None = 1024

    @property
    def effective_total_memory_mb(self) -> int | None:
        """The cgroup memory cap: ``total_memory_mb``, else twice ``memory_mb`` plus the ``/tmp`` size."""
        if self.total_memory_mb is not None:
            return self.total_memory_mb
        if self.memory_mb is None:
            return None
        return 2 * self.memory_mb + (self.tmp_size_mb or 0)


DEFAULT_SANDBOX_UID = 1_000_000_000
"""The first host uid (and gid) a root application's sandboxed kernels run as: far from system
users, ``nobody`` and the usual subordinate-id ranges, so that no other host process shares it."""
DEFAULT_SANDBOX_UIDS = 4096
"""How many uids from ``sandbox_uid`` on the kernels of a root application may use, one each."""


class SandboxPolicy(BaseModel):
    """Where a sandboxed kernel may read and write, what network it gets, and its resource limits.

    Relative paths are relative to the workspace; ``~`` is ``home`` (default: the current user's
    home directory). ``allow_read``/``allow_write`` add paths to the allow-list; ``allow_hosts``
    (``"pypi.org"``, ``"*.github.com:443"``) opens HTTP(S) to those hosts only, through a filtering
    proxy (``HTTP(S)_PROXY`` is set in the kernel); ``network=True`` shares the host's network
    entirely (no isolation). ``hidden_paths`` and ``hidden_names`` hide secrets inside visible
    trees; ``extra_hidden_paths`` adds to the defaults. Each launch scans the workspace and the
    allowed trees for them, at most ``hidden_scan_entries`` entries in ``hidden_scan_seconds``
    (past either the kernel is not started). ``private_file_scan`` lists system trees in
    which, when the application runs as root, every file other users could not read is hidden too.
    ``sandbox_uid`` is the first of ``sandbox_uids`` unprivileged host uids the kernels run as when
    the application runs as root: each kernel leases one that no other live kernel on the host holds
    (per-user kernel quotas such as inotify instances are then per kernel, i.e. per conversation),
    and its workspace and ``allow_write`` paths are given to it. A kernel whose workspace already
    belongs to one of them (a restart, a kept workspace) takes that one. When all are leased, kernels
    share one, with a warning. ``sandbox_uids=1`` makes every kernel share ``sandbox_uid``; ``None``
    keeps the kernel root inside a user namespace without capabilities (per-user kernel quotas then
    shared with root).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: Path | None = None
    system_paths: tuple[Path, ...] = DEFAULT_SYSTEM_PATHS
    python_env: bool = True
    allow_read: tuple[Path, ...] = ()
    allow_write: tuple[Path, ...] = ()
    hidden_paths: tuple[str, ...] = DEFAULT_HIDDEN_PATHS
    extra_hidden_paths: tuple[str, ...] = ()
    hidden_names: tuple[str, ...] = DEFAULT_HIDDEN_NAMES
    hidden_scan_entries: PositiveInt = DEFAULT_HIDDEN_SCAN_ENTRIES
    hidden_scan_seconds: PositiveFloat = DEFAULT_HIDDEN_SCAN_SECONDS
    private_file_scan: tuple[Path, ...] = (Path("/etc"),)
    network: bool = False
    allow_hosts: tuple[str, ...] = ()
    limits: ResourceLimits = Field(default_factory=ResourceLimits)
    sandbox_uid: int | None = Field(default=DEFAULT_SANDBOX_UID, ge=1, le=2**32 - 2)
    sandbox_uids: PositiveInt = DEFAULT_SANDBOX_UIDS

    @field_validator("system_paths", "private_file_scan")
    @classmethod
    def _absolute(cls, paths: tuple[Path, ...]) -> tuple[Path, ...]:
        for path in paths:
            if not path.is_absolute():
                raise ValueError(f"system paths must be absolute, got {str(path)!r}")
        return paths

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        for host in hosts:
            if not _HOST_PATTERN.match(host):
                raise ValueError(f"invalid host {host!r}: use 'name', 'name:port' or '*.domain[:port]'")
        return hosts

    @model_validator(mode="after")
    def _network_consistent(self) -> SandboxPolicy:
        if self.network and self.allow_hosts:
            raise ValueError("network=True already opens every host; drop allow_hosts or set network=False")
        return self

    @model_validator(mode="after")
    def _uid_range_fits(self) -> SandboxPolicy:
        if self.sandbox_uid is not None and self.sandbox_uid + self.sandbox_uids - 1 > 2**32 - 2:
            raise ValueError(
                f"sandbox_uid {self.sandbox_uid} + sandbox_uids {self.sandbox_uids} goes past the "
                f"largest uid {2**32 - 2}"
            )
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SandboxPolicy:
        """Load a policy from a ``.toml`` or ``.json`` file (the file's top level is the policy)."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read sandbox policy {file}: {exc.strerror or exc}") from exc
        data: Any
        try:
            if file.suffix.lower() == ".toml":
                data = tomllib.loads(text)
            elif file.suffix.lower() == ".json":
                data = json.loads(text)
            else:
                raise ConfigError(f"sandbox policy {file}: unknown format, use a .toml or .json file")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"sandbox policy {file} is not valid {file.suffix[1:].upper()}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"sandbox policy {file}: the top level must be a table/object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = _problems(exc)
            if len(problems) == 1:
                raise ConfigError(f"invalid sandbox policy {file}: {problems[0]}") from None
            listed = "".join(f"\n  {problem}" for problem in problems)
            raise ConfigError(f"invalid sandbox policy {file} ({len(problems)} problems):{listed}") from None

    def resolved_home(self) -> Path:
        """The home directory ``~`` refers to."""
        return (self.home or Path.home()).expanduser().absolute()

    def expand(self, path: str | os.PathLike[str], workspace: Path) -> Path:
        """``path`` made absolute: ``~`` is the policy's home, relative paths are under ``workspace``."""
        text = os.fspath(path)
        if text == "~" or text.startswith("~/"):
            return Path(os.path.normpath(self.resolved_home() / text[2:]))
        return Path(os.path.normpath(workspace / text))

    def all_hidden_paths(self) -> tuple[str, ...]:
        """``hidden_paths`` plus ``extra_hidden_paths``."""
        return (*self.hidden_paths, *self.extra_hidden_paths)


def resolve_sandbox(value: bool | SandboxPolicy | str | os.PathLike[str] | None) -> SandboxPolicy | None:
    """Turn the executor's ``sandbox=`` argument into a policy (``None``: no sandbox).

    ``True`` is the default policy, a :class:`SandboxPolicy` is used as is, a path is loaded with
    :meth:`SandboxPolicy.from_file`; ``False``/``None`` mean no sandbox.
    """
    if value is None or value is False:
        return None
    if value is True:
        return SandboxPolicy()
    if isinstance(value, SandboxPolicy):
        return value
    if isinstance(value, (str, os.PathLike)):
        return SandboxPolicy.from_file(value)
    raise ConfigError(
        f"invalid sandbox setting {value!r}: use True/False, a SandboxPolicy or a policy file path"
    )


def _problems(error: ValidationError) -> list[str]:
    """One ``key.path: problem`` line per validation error, without pydantic's URLs."""
    lines = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        if problem["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown setting")
            continue
        message = str(problem["msg"]).removeprefix("Value error, ")
        value = problem.get("input")
        if isinstance(value, (str, int, float, bool)) and problem["type"] != "missing":
            message += f" (got {value!r})"
        lines.append(f"{where}: {message}")
    return lines
