"""The in-sandbox bootstrap: applies rlimits, then runs the kernel module in-process or execs a program."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipybox_core.sandbox import ResourceLimits
from ipybox_core.sandbox._command import boot_source as _boot_source
from ipybox_core.sandbox._command import module_index, rlimits

LIMITS = {"RLIMIT_NOFILE": [123, 123], "RLIMIT_FSIZE": [10_000_000, 10_000_000]}


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["/venv/bin/python", "-m", "ipykernel_launcher", "-f", "k.json"], 1),
        (["python3.11", "-X", "frozen_modules=off", "-u", "-m", "ipykernel_launcher"], 4),
        (["/usr/bin/python3", "-m"], None),
        (["/usr/bin/python3", "script.py", "-m", "x"], None),
        (["/usr/bin/python3", "-c", "pass", "-m", "x"], None),
        (["/opt/conda/bin/ipython", "kernel"], None),
        ([], None),
    ],
)
def test_kernel_module_detection(argv: list[str], index: int | None) -> None:
    assert module_index(argv) == index


def run_boot(tmp_path: Path, config: dict[str, object], *command: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _boot_source(), json.dumps(config), *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
        check=True,
    )
    return done.stdout.strip()


def test_limits_apply_to_a_module_run_in_process(tmp_path: Path) -> None:
    (tmp_path / "show_limits.py").write_text(
        "import resource, signal, sys\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], resource.getrlimit(resource.RLIMIT_FSIZE)[0],\n"
        "      signal.getsignal(signal.SIGXCPU).__name__, sys.argv[1:])\n"
    )
    config = {"rlimits": LIMITS, "cpu_seconds": 100, "cpu_grace_seconds": 5}
    output = run_boot(tmp_path, config, "-m", "show_limits", "--flag", "x")
    assert output == "123 10000000 on_sigxcpu ['--flag', 'x']"


def test_limits_apply_to_an_executed_program(tmp_path: Path) -> None:
    output = run_boot(tmp_path, {"rlimits": LIMITS}, "--exec", "/bin/sh", "-c", "ulimit -n; ulimit -f")
    assert output.split() == ["123", str(10_000_000 // 512)]


def test_a_cpu_budget_raises_only_while_a_cell_runs(tmp_path: Path) -> None:
    (tmp_path / "burn.py").write_text(
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # what ipykernel does during a cell\n"
        "try:\n"
        "    while True:\n"
        "        pass\n"
        "except TimeoutError as exc:\n"
        "    print(type(exc).__name__, 'cpu_seconds' in str(exc))\n"
    )
    config = {"rlimits": {"RLIMIT_CPU": [1, 10]}, "cpu_seconds": 1, "cpu_grace_seconds": 9}
    assert run_boot(tmp_path, config, "-m", "burn") == "CpuTimeLimitExceeded True"


def test_unrunnable_command_is_reported(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _boot_source(), "{}", "script.py"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "cannot run" in done.stderr


def test_rlimits_from_resource_limits() -> None:
    limits = ResourceLimits(memory_mb=100, cpu_seconds=5, cpu_grace_seconds=2, open_files=50, file_size_mb=3)
    assert rlimits(limits, process_limit=False) == {
        "RLIMIT_DATA": [100 * 2**20] * 2,
        "RLIMIT_CPU": [5, 7],
        "RLIMIT_NOFILE": [50, 50],
        "RLIMIT_FSIZE": [3 * 2**20] * 2,
    }
    assert rlimits(limits, process_limit=True)["RLIMIT_NPROC"] == [limits.max_processes] * 2
    off = ResourceLimits(memory_mb=None, open_files=None, file_size_mb=None, max_processes=None)
    assert rlimits(off, process_limit=True) == {}
