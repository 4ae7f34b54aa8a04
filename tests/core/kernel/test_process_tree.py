"""KernelProcess finds its process tree with psutil and never signals a pid that was reused."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import psutil

from ipybox_core.kernel._process import KernelProcess, _same_process, _stat_of

# The child starts a grandchild in a session of its own (out of the kernel's group and session).
TREE = (
    "import subprocess, sys, time\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
    "print(g.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _wait_for_descendant(process: KernelProcess) -> list[int]:
    for _ in range(200):
        pids = [stat.pid for stat in process.descendants()]
        if pids:
            return pids
        time.sleep(0.05)
    raise AssertionError("the grandchild never appeared")


def test_a_descendant_in_its_own_session_is_found_and_killed(tmp_path: Path) -> None:
    process = KernelProcess([sys.executable, "-c", TREE], env=dict(os.environ), cwd=tmp_path)
    try:
        grandchild = psutil.Process(_wait_for_descendant(process)[0])
        assert os.getsid(grandchild.pid) != os.getsid(process.pid)
        known = process.descendants()
    finally:
        process.kill(known)
    _, alive = psutil.wait_procs([grandchild], timeout=10)  # SIGKILL lands asynchronously
    assert alive == []
    assert process.exit_code() == -9


def test_a_pid_with_another_start_time_is_not_the_same_process() -> None:
    stat = _stat_of(psutil.Process(os.getpid()))
    assert stat is not None and _same_process(stat)
    assert not _same_process(dataclasses.replace(stat, start_time=stat.start_time - 1))
