"""Per-kernel cgroups: v2 delegation and v1 hierarchies (fake trees), real cgroupfs where writable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sandbox_kit import require_bwrap, start_sandboxed

from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
from ipybox_core.sandbox._cgroups import available_controllers, create_cgroups
from prerequisites import require


def fake_tree(tmp_path: Path, self_cgroup: str, dirs: dict[str, str]) -> tuple[Path, Path]:
    """A directory tree shaped like /sys/fs/cgroup; ``dirs`` maps a directory to its subtree_control."""
    root = tmp_path / "cgroup"
    for relative, subtree in dirs.items():
        directory = root / relative
        directory.mkdir(parents=True, exist_ok=True)
        if subtree is not None:
            (directory / "cgroup.subtree_control").write_text(subtree)
    membership = tmp_path / "self-cgroup"
    membership.write_text(self_cgroup)
    return root, membership


def test_cgroup_v2_with_delegated_controllers(tmp_path: Path) -> None:
    root, membership = fake_tree(tmp_path, "0::/user.slice/app\n", {"user.slice/app": "memory pids"})
    (root / "cgroup.controllers").write_text("cpu memory pids")
    runtime_dir = tmp_path / "rt"
    made = create_cgroups(runtime_dir, memory_bytes=123456, max_pids=42, root=root, self_cgroup=membership)
    assert made.memory and made.pids and len(made.procs_files) == 1
    child = made.procs_files[0].parent
    assert child.parent == root / "user.slice" / "app" and child.name.startswith(f"ipybox-{os.getpid()}-")
    assert (child / "memory.max").read_text() == "123456" and (child / "pids.max").read_text() == "42"
    again = create_cgroups(runtime_dir, memory_bytes=123456, max_pids=42, root=root, self_cgroup=membership)
    assert again.procs_files == made.procs_files  # a restart reuses the kernel's cgroup


def test_cgroup_v2_without_delegation_is_not_used(tmp_path: Path) -> None:
    root, membership = fake_tree(tmp_path, "0::/user.slice/app\n", {"user.slice/app": ""})
    (root / "cgroup.controllers").write_text("memory pids")
    made = create_cgroups(tmp_path / "rt", memory_bytes=1, max_pids=1, root=root, self_cgroup=membership)
    assert not made.memory and not made.pids and made.procs_files == []
    assert available_controllers(root=root, self_cgroup=membership) == set()


def test_cgroup_v1_hierarchies(tmp_path: Path) -> None:
    membership_text = "9:name=systemd:/\n8:pids:/\n4:memory:/jobs/mine\n0::/\n"
    root, membership = fake_tree(
        tmp_path, membership_text, {"memory/jobs/mine": None, "pids": None, "unified": ""}
    )
    made = create_cgroups(tmp_path / "rt", memory_bytes=1000, max_pids=7, root=root, self_cgroup=membership)
    assert made.memory and made.pids and len(made.procs_files) == 2
    memory_dir = next(path.parent for path in made.procs_files if "memory" in path.parts)
    pids_dir = next(path.parent for path in made.procs_files if "pids" in path.parts)
    assert memory_dir.parent == root / "memory" / "jobs" / "mine"
    assert (memory_dir / "memory.limit_in_bytes").read_text() == "1000"
    assert (pids_dir / "pids.max").read_text() == "7"
    assert available_controllers(root=root, self_cgroup=membership) == {"memory", "pids"}


def test_no_limits_no_cgroups(tmp_path: Path) -> None:
    root, membership = fake_tree(tmp_path, "4:memory:/\n8:pids:/\n", {"memory": None, "pids": None})
    made = create_cgroups(
        tmp_path / "rt", memory_bytes=None, max_pids=None, root=root, self_cgroup=membership
    )
    assert made.procs_files == [] and not any((root / "memory").iterdir())


def test_real_cgroups_are_removed_once_their_kernel_is_gone(tmp_path: Path) -> None:
    # CI runs as root with writable cgroups: a host without them must not skip silently there.
    require(bool(available_controllers()), "no writable cgroup (cgroup v1 as root, or v2 delegated)")
    first_rt, second_rt = tmp_path / "rt1", tmp_path / "rt2"
    first_rt.mkdir()
    second_rt.mkdir()
    first = create_cgroups(first_rt, memory_bytes=2**30, max_pids=100)
    assert first.procs_files and all(path.parent.is_dir() for path in first.procs_files)
    shutil.rmtree(first_rt)
    second = create_cgroups(second_rt, memory_bytes=2**30, max_pids=100)
    assert not any(path.parent.exists() for path in first.procs_files)
    shutil.rmtree(second_rt)
    create_cgroups(tmp_path, memory_bytes=2**30, max_pids=100)  # collects the second one
    assert not any(path.parent.exists() for path in second.procs_files)


async def test_a_sandboxed_kernel_runs_in_its_cgroups(tmp_path: Path) -> None:
    require_bwrap()
    require("pids" in available_controllers(), "no writable pids cgroup")
    policy = SandboxPolicy(limits=ResourceLimits(max_processes=77, memory_mb=1000, total_memory_mb=1500))
    kernel = await start_sandboxed(policy, tmp_path)
    try:
        assert kernel.pid is not None
        lines = Path(f"/proc/{kernel.pid}/cgroup").read_text().splitlines()
        pids_line = next(line for line in lines if ":pids:" in line or line.startswith("0::"))
        assert "/ipybox-" in pids_line
        base = Path("/sys/fs/cgroup") if pids_line.startswith("0::") else Path("/sys/fs/cgroup/pids")
        assert (base / pids_line.split(":", 2)[2].lstrip("/") / "pids.max").read_text().strip() == "77"
        output = await kernel.run("import os\nprint(len(os.listdir('/proc/self/task')) > 0)")
        assert output.text.strip() == "True"
    finally:
        await kernel.shutdown(now=True)
