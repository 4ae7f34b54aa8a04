"""An interpreter path containing ``..`` (``sys.executable`` of ``cd project && ../venv/bin/python``).

Inside the sandbox only the interpreter's environment is visible, so a ``..`` after a directory that
is not (``/work/project/../venv/bin/python``) cannot be resolved there and the kernel never starts.
The host resolves the directory part instead and keeps the file name (a venv's ``python`` symlink).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox import SandboxPolicy
from ipybox_core.sandbox._mounts import plan_filesystem
from ipybox_core.sandbox._pyenv import find_executable


def make_venv(tmp_path: Path) -> Path:
    """``<tmp>/venv`` whose ``bin/python`` is a symlink to this interpreter; returns the link."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv / "bin" / "python"


def test_a_path_with_dotdot_is_resolved_on_the_host(tmp_path: Path) -> None:
    python = make_venv(tmp_path)
    (tmp_path / "project").mkdir()
    program = f"{tmp_path}/project/../venv/bin/python"

    found = find_executable(program, {"PATH": os.defpath})

    assert found is not None and ".." not in found.parts
    assert found == python.parent.resolve() / "python" and found.is_symlink()  # the name is kept
    # control: the path as given only works where "project" exists; the sandbox does not show it
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runtime = tmp_path / "rt"
    (runtime / "kernel.1").mkdir(parents=True)
    spec = LaunchSpec(
        argv=[program, "-m", "ipykernel_launcher"],
        env={"PATH": os.defpath},
        cwd=workspace,
        runtime_dir=runtime,
        ipc_dir=runtime / "kernel.1",
    )
    plan = plan_filesystem(SandboxPolicy(home=tmp_path / "home"), workspace=workspace, spec=spec)
    assert plan.is_visible(found) and plan.is_visible(python.parent.parent)
    assert not plan.is_visible(tmp_path / "project")
