"""The sandbox's file system, built from an allow-list: which host paths appear, writable or not.

The sandbox root is an empty read-only tmpfs; only the binds listed here appear in it (at their host
paths). Hidden paths inside those binds are covered last: directories by an empty tmpfs with mode
000, files by a read-only bind of an empty mode-000 file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipybox_core.errors import SandboxError
from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox._pyenv import PythonPaths, find_executable, python_environment_paths
from ipybox_core.sandbox._scan import find_by_name, find_private
from ipybox_core.sandbox.policy import SandboxPolicy

SANDBOX_HOME = Path("/tmp/ipybox-home")
"""``HOME`` inside the sandbox when the real home directory is not visible (private, in ``/tmp``)."""

_RESERVED = (Path("/proc"), Path("/dev"), Path("/tmp"))


@dataclass(frozen=True)
class Bind:
    """A host path shown at the same path inside the sandbox (``source`` is its resolved target)."""

    path: Path
    source: Path
    writable: bool


@dataclass(frozen=True)
class Hidden:
    """A path masked inside the sandbox: a directory (empty, mode 000) or a file (empty, mode 000)."""

    path: Path
    directory: bool


@dataclass(frozen=True)
class FilesystemPlan:
    """Every mount of the sandbox, in the order bubblewrap must make them."""

    binds: tuple[Bind, ...]
    symlinks: tuple[tuple[str, Path], ...]
    hidden: tuple[Hidden, ...]
    home: Path
    tmp_size_bytes: int | None

    def enclosing_bind(self, path: Path) -> Bind | None:
        """The deepest bind that contains ``path``."""
        best: Bind | None = None
        for bind in self.binds:
            if path.is_relative_to(bind.path) and (
                best is None or len(bind.path.parts) > len(best.path.parts)
            ):
                best = bind
        return best

    def is_visible(self, path: Path) -> bool:
        """Whether the host's ``path`` (absolute) is shown inside the sandbox."""
        path = Path(os.path.normpath(path))
        if any(path.is_relative_to(hidden.path) for hidden in self.hidden):
            return False
        return self.enclosing_bind(path) is not None

    def is_writable(self, path: Path) -> bool:
        """Whether the host's ``path`` is shown inside the sandbox and writable there."""
        bind = self.enclosing_bind(Path(os.path.normpath(path)))
        return bind is not None and bind.writable and self.is_visible(path)

    def bwrap_args(
        self, deny_file: Path, sockets: Sequence[tuple[Path, Path]] = (), *, unprivileged: bool = False
    ) -> list[str]:
        """The bubblewrap options that build this file system.

        ``deny_file`` is an empty mode-000 file (the mask of hidden files); ``sockets`` are host unix
        sockets ``(source, path in /tmp)`` to show inside (a mount point cannot be removed).
        ``unprivileged``: the kernel will switch to an unprivileged uid, so the directories leading
        to each bind are made traversable (``0755``) and ``HOME`` is left to the kernel to create.
        """
        size = ["--size", str(self.tmp_size_bytes)] if self.tmp_size_bytes else []
        early = [bind for bind in self.binds if len(bind.path.parts) <= 2 and not _in_tmp(bind.path)]
        late = [bind for bind in self.binds if bind not in early]
        args: list[str] = []
        opened: set[Path] = {Path("/"), *_RESERVED}

        def bind(item: Bind) -> list[str]:
            if not unprivileged:
                return _bind_args(item)
            parents: list[str] = []
            for parent in reversed(item.path.parents):
                mounted = any(parent.is_relative_to(other.path) for other in self.binds if other is not item)
                if parent not in opened and not mounted:
                    parents += ["--perms", "0755", "--dir", str(parent)]
                    opened.add(parent)
            return parents + _bind_args(item)

        for item in early:
            args += bind(item)
        for target, link in self.symlinks:
            args += ["--symlink", target, str(link)]
        # /proc read-only: as host root (even without capabilities) the sandbox could otherwise write
        # global sysctls such as kernel.core_pattern, which bwrap leaves writable.
        args += ["--proc", "/proc", "--remount-ro", "/proc"]
        args += ["--dev", "/dev", *size, "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        args += [*size, "--perms", "1777", "--tmpfs", "/tmp"]
        for item in late:
            args += bind(item)
        for hidden in self.hidden:
            if hidden.directory:
                args += ["--perms", "0000", "--tmpfs", str(hidden.path)]
            else:
                args += ["--ro-bind", str(deny_file), str(hidden.path)]
        for socket_source, socket_target in sockets:
            args += ["--ro-bind", str(socket_source), str(socket_target)]
        if self.home == SANDBOX_HOME and not unprivileged:
            args += ["--perms", "0700", "--dir", str(SANDBOX_HOME)]
        args += ["--remount-ro", "/"]
        return args


def plan_filesystem(
    policy: SandboxPolicy,
    *,
    workspace: Path,
    spec: LaunchSpec,
    interpreters: Sequence[Path] = (),
    sockets: Sequence[Path] = (),
) -> FilesystemPlan:
    """Compute the sandbox's mounts for launching ``spec`` under ``policy``.

    ``interpreters`` are further Python interpreters whose environment must be visible; ``sockets``
    are host unix sockets the kernel may connect to (e.g. the tool server's), shown at their path.
    Raises :class:`SandboxError` when a path the policy names does not exist, a socket is not a
    socket, or the workspace, the runtime directory or the working directory would be invisible.
    """
    workspace = workspace.absolute()
    binds: dict[Path, Bind] = {}
    symlinks: list[tuple[str, Path]] = []

    def add(path: Path, writable: bool, *, required: bool, what: str) -> None:
        if not path.exists():
            if required:
                raise SandboxError(f"{what} {path} does not exist")
            return
        if path in _RESERVED or any(path.is_relative_to(p) for p in _RESERVED[:2]):
            raise SandboxError(f"{what} {path}: /proc, /dev and /tmp itself are private to the sandbox")
        source = path.resolve()
        for view in {Path(os.path.normpath(path)), source}:
            old = binds.get(view)
            if old is None or (writable and not old.writable):
                binds[view] = Bind(view, source, writable)

    for system in policy.system_paths:
        if system.is_symlink() and system.parent == Path("/"):
            symlinks.append((os.readlink(system), system))
        else:
            add(system, False, required=False, what="system path")
    user_trees = [workspace]
    if policy.python_env:
        python = _python_paths(spec, interpreters)
        for path in python.prefixes:
            add(path, False, required=False, what="Python path")
        for path in python.extra:
            add(path, False, required=False, what="Python path")
            user_trees.append(path)
    for path in policy.allow_read:
        user_trees.append(policy.expand(path, workspace))
        add(user_trees[-1], False, required=True, what="allow_read path")
    add(workspace, True, required=True, what="workspace")
    # Of the host's runtime directory the kernel sees its own socket directory (writable) and the
    # files it reads at start (read-only mount points it cannot replace); nothing else.
    if spec.ipc_dir is None:
        raise SandboxError("the launch names no kernel socket directory (LaunchSpec.ipc_dir)")
    ipc_dir = spec.ipc_dir.absolute()
    add(ipc_dir, True, required=True, what="kernel socket directory")
    for path in spec.kernel_files:
        add(path.absolute(), False, required=True, what="kernel start file")
    for path in policy.allow_write:
        user_trees.append(policy.expand(path, workspace))
        add(user_trees[-1], True, required=True, what="allow_write path")
    for path in sockets:
        if not path.is_socket():
            raise SandboxError(f"{path} is not a unix socket (only sockets can be passed as sockets=)")
        add(path.absolute(), False, required=True, what="socket")
    if policy.network:
        _add_resolver(binds)

    ordered = _drop_redundant(binds.values())
    for bind in ordered:
        for system in policy.system_paths:
            if bind.writable and system.exists() and system.resolve().is_relative_to(bind.source):
                raise SandboxError(
                    f"the writable path {bind.path} contains the system directory {system}: the sandbox "
                    "could change the system; choose a narrower workspace or allow_write path"
                )
    allowed_sockets = {path.absolute() for path in sockets} | {path.resolve() for path in sockets}
    hidden = tuple(
        item
        for item in _hidden_paths(policy, workspace, ordered, user_trees)
        if item.path not in allowed_sockets
    )
    home = policy.resolved_home()
    plan = FilesystemPlan(
        binds=tuple(ordered),
        symlinks=tuple(symlinks),
        hidden=hidden,
        home=SANDBOX_HOME,
        tmp_size_bytes=policy.limits.tmp_size_mb * 2**20 if policy.limits.tmp_size_mb else None,
    )
    if plan.is_visible(home):
        plan = FilesystemPlan(plan.binds, plan.symlinks, plan.hidden, home, plan.tmp_size_bytes)
    for what, path in (
        ("workspace", workspace),
        ("kernel socket directory", ipc_dir),
        ("kernel working directory", spec.cwd.absolute()),
    ):
        if not plan.is_visible(path) or not plan.is_visible(path.resolve()):
            raise SandboxError(
                f"the {what} {path} would be invisible in the sandbox (hidden by the policy or not "
                "in an allowed path)"
            )
    return plan


def _python_paths(spec: LaunchSpec, interpreters: Sequence[Path]) -> PythonPaths:
    paths = PythonPaths()
    executable = find_executable(spec.argv[0], spec.env) if spec.argv else None
    for exe in [*([executable] if executable else []), *interpreters]:
        found = python_environment_paths(exe, spec.env)
        paths.prefixes += found.prefixes
        paths.extra += found.extra
    return paths


def _add_resolver(binds: dict[Path, Bind]) -> None:
    """With host networking, keep DNS working when ``/etc/resolv.conf`` points outside ``/etc``."""
    target = Path("/etc/resolv.conf").resolve()
    if target.exists() and not any(target.is_relative_to(path) for path in binds):
        binds[target] = Bind(target, target, False)


def _drop_redundant(binds: Iterable[Bind]) -> list[Bind]:
    """Sort parents first and drop binds that their nearest enclosing bind already provides."""
    ordered = sorted(binds, key=lambda bind: (len(bind.path.parts), str(bind.path)))
    kept: list[Bind] = []
    for bind in ordered:
        parents = [other for other in kept if bind.path.is_relative_to(other.path)]
        nearest = max(parents, key=lambda other: len(other.path.parts), default=None)
        same_target = (
            nearest is not None and nearest.source / bind.path.relative_to(nearest.path) == bind.source
        )
        if nearest is not None and nearest.writable == bind.writable and same_target:
            continue
        kept.append(bind)
    return kept


def _hidden_paths(
    policy: SandboxPolicy, workspace: Path, binds: list[Bind], user_trees: list[Path]
) -> tuple[Hidden, ...]:
    """Where to mount masks: every view (inside the sandbox) of every hidden host path.

    Host paths are resolved first and masks never land on a symlink: a symlink is followed to its
    target, which is masked wherever a bind shows it.
    """
    candidates = [policy.expand(pattern, workspace) for pattern in policy.all_hidden_paths()]
    for tree in dict.fromkeys(path.resolve() for path in user_trees):
        candidates.extend(find_by_name(tree, policy.hidden_names))
    if os.geteuid() == 0:
        for tree in policy.private_file_scan:
            if tree.is_dir():
                candidates.extend(find_private(tree.resolve()))
    hidden: dict[Path, bool] = {}
    for candidate in candidates:
        if not os.path.lexists(candidate):
            continue
        target = candidate.resolve()
        if not target.exists():
            continue
        for bind in binds:
            if target.is_relative_to(bind.source):
                hidden[bind.path / target.relative_to(bind.source)] = target.is_dir()
            elif bind.source.is_relative_to(target):  # a bind inside a hidden tree is hidden too
                hidden[bind.path] = bind.source.is_dir()
    ordered = sorted(hidden, key=lambda path: (len(path.parts), str(path)))
    kept = [path for i, path in enumerate(ordered) if not any(path.is_relative_to(p) for p in ordered[:i])]
    return tuple(Hidden(path, hidden[path]) for path in kept)


def _in_tmp(path: Path) -> bool:
    return path.is_relative_to("/tmp")


def _bind_args(bind: Bind) -> list[str]:
    return ["--bind" if bind.writable else "--ro-bind", str(bind.source), str(bind.path)]
