"""Every benchmark imports and runs at a tiny size, so none can rot unnoticed.

Each ``benchmarks/bench_*.py`` defines ``TINY_ARGS``: command-line arguments for a run of a few
seconds. The figures of such a run mean nothing; the test checks that the script still starts, runs
every part and exits cleanly, the way its docstring says to run it.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from ipybox_core.sandbox import SandboxUnavailable, probe_sandbox
from prerequisites import require
from servers.gateway import kernelgateway_available

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))
LINUX_ONLY = {
    "bench_scale": "reads /proc/<pid>/smaps_rollup",
    "bench_sandbox": "runs bubblewrap",
    "bench_relaunch_scan": "runs bubblewrap",
}
RUN_TIMEOUT = 600
"""Seconds a tiny run may take before it counts as hung (about a minute each beside a second suite)."""

pytestmark = pytest.mark.slow


def load(path: Path) -> ModuleType:
    """Import a benchmark as a module (nothing may run at import: only under ``__main__``)."""
    spec = importlib.util.spec_from_file_location(f"_benchmark_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def require_bwrap() -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    try:
        probe_sandbox()
    except SandboxUnavailable as exc:
        require(False, f"bubblewrap cannot run here: {exc}")


def test_the_benchmarks_are_found() -> None:
    assert len(BENCHMARKS) >= 8, [path.name for path in BENCHMARKS]
    stray = sorted(
        path.name
        for path in (ROOT / "benchmarks").glob("*.py")
        if path not in BENCHMARKS and not path.name.startswith("_")
    )
    assert not stray, f"name benchmarks bench_*.py (private helpers _*.py) so this test runs them: {stray}"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            path,
            id=path.stem,
            # A platform condition, not a prerequisite: these measure Linux-only mechanisms.
            marks=pytest.mark.skipif(
                path.stem in LINUX_ONLY and not sys.platform.startswith("linux"),
                reason=f"{path.name} {LINUX_ONLY.get(path.stem)}: Linux only",
            ),
        )
        for path in BENCHMARKS
    ],
)
def test_benchmark_runs_at_a_tiny_size(path: Path) -> None:
    module = load(path)
    tiny = getattr(module, "TINY_ARGS", None)
    assert isinstance(tiny, list) and all(isinstance(arg, str) for arg in tiny), (
        f"{path.name} needs TINY_ARGS: command-line arguments for a run of a few seconds"
    )
    missing_gateway = False
    if path.stem == "bench_scale" and not kernelgateway_available():
        tiny = [
            *tiny,
            "--backends",
            "local",
        ]  # the local half runs anyway; the gateway half is required below
        missing_gateway = True
    if path.stem == "bench_sandbox":
        require_bwrap()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(path), *tiny],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, f"{path.name} {' '.join(tiny)} failed:\n{done.stdout}\n{done.stderr[-5000:]}"
    assert done.stdout.strip(), f"{path.name} printed no figures:\n{done.stderr[-5000:]}"
    print(f"{path.name}: tiny run in {seconds:.1f} s")
    require(not missing_gateway, "the gateway half of bench_scale needs the gateway extra")
