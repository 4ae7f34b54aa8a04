"""The sandbox's file system, built from an allow-list: which host paths appear, writable or not.

The sandbox root is an empty read-only tmpfs; only the binds listed here appear in it (at their host
paths). Hidden paths inside those binds are covered last: directories by an empty tmpfs with mode
000, files by a read-only bind of an empty mode-000 file.

What is hidden is decided by what a path is, never by where the sandbox last left it: every name
in the user trees is matched against ``hidden_names`` (no directory is skipped), every name of a
hidden file is hidden (hard links; files whose directory was renamed are found again by their
identity), and the directories leading to an explicitly hidden path inside a writable tree are
*pinned*: bound onto themselves, so that the sandbox cannot rename them (``EBUSY``) and the path
stays where the policy names it, for every later launch too.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipybox_core.errors import SandboxError
from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox._pyenv import PythonPaths, find_executable, python_environment_paths
from ipybox_core.sandbox._scan import (
    FileId,
    HiddenScanGaveUp,
    ScanBound,
    find_private,
    scan_user_trees,
)
from ipybox_core.sandbox.policy import SandboxPolicy

SANDBOX_HOME = Path("/tmp/ipybox-home")
"""``HOME`` inside the sandbox when the real home directory is not visible (private, in ``/tmp``)."""

_RESERVED = (Path("/proc"), Path("/dev"), Path("/tmp"))
MAX_MASKS = 10_000
"""Hidden paths one sandbox may have (each is a mount); more and the kernel is not started."""


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
    pins: tuple[Bind, ...] = ()
    """Directories bound onto themselves so the sandbox cannot rename them: each one leading to an
    explicitly hidden path inside a writable bind."""
    hidden_ids: frozenset[FileId] = frozenset()
    """Identities of what is hidden in the user trees (for the next launch's scan)."""

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
        for pin in self.pins:
            args += _bind_args(pin)
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
    known_hidden: Collection[FileId] = frozenset(),
) -> FilesystemPlan:
    """Compute the sandbox's mounts for launching ``spec`` under ``policy``.

    ``interpreters`` are further Python interpreters whose environment must be visible; ``sockets``
    are host unix sockets the kernel may connect to (e.g. the tool server's), shown at their path;
    ``known_hidden`` are identities hidden at earlier launches (:attr:`FilesystemPlan.hidden_ids`),
    hidden again wherever they are now. Raises :class:`SandboxError` when a path the policy names
    does not exist, a socket is not a socket, or the workspace, the runtime directory or the
    working directory would be invisible; :class:`~._scan.HiddenScanGaveUp` when the scan for
    hidden paths reaches the policy's bound or finds more than :data:`MAX_MASKS`.
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
    masks = _hidden_paths(policy, workspace, ordered, user_trees, known_hidden)
    hidden = tuple(item for item in masks.hidden if item.path not in allowed_sockets)
    home = policy.resolved_home()
    plan = FilesystemPlan(
        binds=tuple(ordered),
        symlinks=tuple(symlinks),
        hidden=hidden,
        home=SANDBOX_HOME,
        tmp_size_bytes=policy.limits.tmp_size_mb * 2**20 if policy.limits.tmp_size_mb else None,
        pins=masks.pins,
        hidden_ids=masks.identities,
    )
    if plan.is_visible(home):
        plan = dataclasses.replace(plan, home=home)
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


@dataclass(frozen=True)
class _Masks:
    hidden: tuple[Hidden, ...]
    pins: tuple[Bind, ...]
    identities: frozenset[FileId]


def _hidden_paths(
    policy: SandboxPolicy,
    workspace: Path,
    binds: list[Bind],
    user_trees: list[Path],
    known: Collection[FileId],
) -> _Masks:
    """Where to mount masks: every view (inside the sandbox) of every hidden host path.

    Host paths are resolved first and masks never land on a symlink: a symlink is followed to its
    target, which is masked wherever a bind shows it.
    """
    trees = _outermost(path.resolve() for path in user_trees)
    explicit = _existing_targets(policy.expand(pattern, workspace) for pattern in policy.all_hidden_paths())
    scan = scan_user_trees(
        trees,
        policy.hidden_names,
        known={*known, *(_identity(info) for info in explicit.values())},
        bound=ScanBound(policy.hidden_scan_entries, policy.hidden_scan_seconds),
        max_found=MAX_MASKS,
    )
    targets = {**_existing_targets(map(Path, (*scan.matches, *scan.known))), **explicit}
    if os.geteuid() == 0:
        for tree in policy.private_file_scan:
            if tree.is_dir():
                targets.update(_existing_targets(find_private(tree.resolve())))
    hidden_ids = {_identity(info) for info in targets.values()}
    other_names = [
        Path(name)
        for identity, names in scan.linked.items()
        if identity in hidden_ids or identity in scan.covered_links
        for name in names
    ]
    if len(targets) + len(other_names) > 2 * MAX_MASKS:
        raise _too_many_masks(len(targets) + len(other_names))
    targets.update(_existing_targets(other_names))
    hidden: dict[Path, bool] = {}
    for target, info in targets.items():
        for bind in binds:
            if target.is_relative_to(bind.source):
                hidden[bind.path / target.relative_to(bind.source)] = stat.S_ISDIR(info.st_mode)
            elif bind.source.is_relative_to(target):  # a bind inside a hidden tree is hidden too
                hidden[bind.path] = bind.source.is_dir()
    masks = _outermost(hidden)
    if len(masks) > MAX_MASKS:
        raise _too_many_masks(len(masks))
    return _Masks(
        hidden=tuple(Hidden(path, hidden[path]) for path in masks),
        pins=_pins(explicit, binds, set(masks)),
        identities=frozenset(
            _identity(info)
            for target, info in targets.items()
            if any(target.is_relative_to(tree) for tree in trees)
        ),
    )


def _identity(info: os.stat_result) -> FileId:
    return (info.st_dev, info.st_ino)


def _too_many_masks(count: int) -> HiddenScanGaveUp:
    return HiddenScanGaveUp(
        f"the sandbox would hide {count} paths (at most {MAX_MASKS}, each is a mount): the kernel is "
        "not started. Remove files named like secrets (SandboxPolicy.hidden_names) from the workspace."
    )


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without duplicates and without those inside another, shallowest first."""
    kept: list[Path] = []
    seen: set[Path] = set()
    for path in sorted(set(paths), key=lambda path: (len(path.parts), str(path))):
        if seen.isdisjoint(path.parents):
            kept.append(path)
            seen.add(path)
    return kept


def _existing_targets(candidates: Iterable[Path]) -> dict[Path, os.stat_result]:
    """Each candidate's resolved target with its ``lstat``; missing targets and loops are dropped."""
    found: dict[Path, os.stat_result] = {}
    for candidate in candidates:
        try:
            if not os.path.lexists(candidate):
                continue
            target = candidate.resolve()
            found[target] = target.lstat()
        except (OSError, RuntimeError):  # vanished, or a symlink loop
            continue
    return found


def _pins(explicit: Iterable[Path], binds: list[Bind], masks: set[Path]) -> tuple[Bind, ...]:
    """The directories to bind onto themselves: each one between a writable bind and the mask of an
    explicitly hidden path shown through it (so the sandbox cannot rename the path away from the
    name the policy gives it)."""
    pins: dict[Path, Bind] = {}
    for target in explicit:
        for bind in binds:
            if not bind.writable or not target.is_relative_to(bind.source):
                continue
            view = bind.path / target.relative_to(bind.source)
            mask = next((path for path in (view, *view.parents) if path in masks), None)
            deepest = max(
                (other for other in binds if view.is_relative_to(other.path)),
                key=lambda other: len(other.path.parts),
            )
            if mask is None or deepest is not bind or not mask.is_relative_to(bind.path):
                continue
            for parent in mask.relative_to(bind.path).parents:
                if parent != Path("."):
                    pins[bind.path / parent] = Bind(bind.path / parent, bind.source / parent, True)
    return tuple(sorted(pins.values(), key=lambda pin: (len(pin.path.parts), str(pin.path))))


def _in_tmp(path: Path) -> bool:
    return path.is_relative_to("/tmp")


def _bind_args(bind: Bind) -> list[str]:
    return ["--bind" if bind.writable else "--ro-bind", str(bind.source), str(bind.path)]
