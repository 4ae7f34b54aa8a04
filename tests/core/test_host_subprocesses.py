"""Every process ``src/`` starts takes its working directory from ``host_cwd()`` (checked statically),
and the rule's parts do what they say: ``python -I``, a ``PATH`` without sandbox-writable or relative
entries, refusal to read from sandbox-writable trees.

The static check looks at every reference to a process-starting function (``subprocess``,
``asyncio.create_subprocess_*``, ``anyio`` processes, ``os.exec*``/``spawn*``/``system``, the MCP
SDK's ``StdioServerParameters``): it must be called with ``cwd=host_cwd(...)``, or be on the reviewed
allow-list below with the reason. A control runs the same check on snippets that must be flagged.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ipybox_core import _host_process
from ipybox_core._host_process import (
    HostRead,
    host_environment,
    host_search_path,
    host_which,
    isolated_python,
    mark_sandbox_writable,
    refuse_sandbox_writable,
    sandbox_can_write,
)
from ipybox_core.errors import ConfigError
from ipybox_core.sandbox import SandboxPolicy, sandbox_launcher
from prerequisites import require

SRC = Path(__file__).resolve().parents[2] / "src"

SPAWNERS = frozenset(
    {
        *(
            f"subprocess.{name}"
            for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput")
        ),
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "asyncio.subprocess.create_subprocess_exec",
        "asyncio.subprocess.create_subprocess_shell",
        "anyio.open_process",
        "anyio.run_process",
        "os.system",
        "os.popen",
        "os.posix_spawn",
        "os.posix_spawnp",
        "pty.spawn",
        "multiprocessing.Process",
        "concurrent.futures.ProcessPoolExecutor",
        "mcp.StdioServerParameters",
        "mcp.client.stdio.StdioServerParameters",
        *(
            f"os.{name}"
            for name in ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")
        ),
        *(
            f"os.{name}"
            for name in ("spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp")
        ),
        "os.spawnvpe",
    }
)
"""Functions that start a process (the MCP SDK spawns the server of a ``StdioServerParameters``)."""
HOST_CWD = "ipybox_core._host_process.host_cwd"

ALLOWED: dict[tuple[str, str, str], str] = {
    (
        "ipybox_core/kernel/_process.py",
        "KernelProcess.__init__",
        "subprocess.Popen",
    ): "the kernel itself, whose working directory is the workspace by design: unsandboxed, the kernel "
    "is the user's code on the host already; sandboxed, the process started here is /bin/sh exec-ing "
    "bubblewrap (absolute paths, PATH=os.defpath, neither reads its working directory) and the "
    "directory is where the kernel starts inside the sandbox",
    (
        "ipybox_core/inkernel/_sandbox_boot.py",
        "main",
        "os.execv",
    ): "runs inside the sandbox (the kernel's first program exec-ing the kernel), not on the host",
}
"""Reviewed exceptions: (file under src/, enclosing function, spawner) -> why it is safe."""


@dataclass(frozen=True)
class Spawn:
    """One reference to a process-starting function."""

    file: str
    function: str
    spawner: str
    line: int
    problem: str | None
    """None: called with ``cwd=host_cwd(...)``."""


class _SpawnFinder(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.names: dict[str, str] = {}  # local name -> dotted name it was imported as
        self.scope: list[str] = []
        self.calls: dict[int, ast.Call] = {}  # id(func node) -> its call
        self.found: list[Spawn] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.names[alias.asname] = alias.name
            else:
                self.names[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            for alias in node.names:
                self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif node.level:  # relative import inside ipybox_core
            for alias in node.names:
                self.names[alias.asname or alias.name] = f".{alias.name}"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def _reference(self, node: ast.Name | ast.Attribute) -> None:
        name = self.dotted(node)
        if name in SPAWNERS:
            call = self.calls.get(id(node))
            self.found.append(Spawn(self.file, ".".join(self.scope), name, node.lineno, self._problem(call)))
        elif isinstance(node, ast.Attribute):
            self.generic_visit(node)

    visit_Name = visit_Attribute = _reference

    def _problem(self, call: ast.Call | None) -> str | None:
        if call is None:
            return "referenced without being called (its cwd cannot be checked)"
        cwd = next((keyword.value for keyword in call.keywords if keyword.arg == "cwd"), None)
        if cwd is None:
            return "no cwd= (it would inherit the host's working directory, perhaps a sandbox's workspace)"
        if isinstance(cwd, ast.Call) and self.dotted(cwd.func) == HOST_CWD:
            return None
        return f"cwd={ast.unparse(cwd)} does not come from host_cwd()"


def find_spawns(source: str, file: str = "<snippet>") -> list[Spawn]:
    """Every reference to a process-starting function in ``source``, with what is wrong with it."""
    finder = _SpawnFinder(file)
    tree = ast.parse(source)
    for node in ast.walk(tree):  # calls first, so that a reference knows the call it is in
        if isinstance(node, ast.Call):
            finder.calls[id(node.func)] = node
    finder.visit(tree)
    return finder.found


def src_spawns() -> Iterator[Spawn]:
    for path in sorted(SRC.rglob("*.py")):
        yield from find_spawns(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))


def test_every_host_subprocess_takes_its_cwd_from_host_cwd() -> None:
    spawns = list(src_spawns())
    offenders = [
        f"src/{spawn.file}:{spawn.line} {spawn.function or '<module>'}: {spawn.spawner}: {spawn.problem}"
        for spawn in spawns
        if spawn.problem is not None and (spawn.file, spawn.function, spawn.spawner) not in ALLOWED
    ]
    assert not offenders, "host-side subprocesses must pass cwd=host_cwd(...):\n" + "\n".join(offenders)
    # The walk sees the real call sites (pip, the probe, the user-namespace helper, MCP stdio servers).
    checked = {(spawn.file, spawn.spawner) for spawn in spawns if spawn.problem is None}
    assert {
        ("ipybox_core/mcp_server/packages.py", "asyncio.create_subprocess_exec"),
        ("ipybox_core/sandbox/probe.py", "subprocess.run"),
        ("ipybox_core/sandbox/_userns.py", "subprocess.Popen"),
        ("ipybox_core/mcp/_transports.py", "mcp.StdioServerParameters"),
    } <= checked


def test_the_allow_list_has_no_stale_entries() -> None:
    present = {(spawn.file, spawn.function, spawn.spawner) for spawn in src_spawns()}
    assert set(ALLOWED) <= present, set(ALLOWED) - present


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("import subprocess\nsubprocess.run(['pip'])", "no cwd="),
        ("import subprocess as sp\nsp.Popen(['pip'], cwd=workspace)", "does not come from host_cwd"),
        ("from subprocess import check_output as co\nco(['pip'], cwd='/tmp')", "does not come from host_cwd"),
        ("import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('pip')", "no cwd="),
        ("import subprocess\nrun = subprocess.run", "referenced without being called"),
        ("import os\nos.system('pip install x')", "no cwd="),
        (
            "from mcp import StdioServerParameters\nStdioServerParameters(command='x', cwd=config.cwd)",
            "host_cwd",
        ),
        ("import anyio\nanyio.open_process(['x'], **options)", "no cwd="),
    ],
)
def test_control_the_check_flags_offending_snippets(snippet: str, problem: str) -> None:
    (spawn,) = find_spawns(snippet)
    assert spawn.problem is not None and problem in spawn.problem


def test_control_the_check_accepts_the_helper() -> None:
    snippet = (
        "import subprocess\nfrom ipybox_core._host_process import host_cwd as where\n"
        "subprocess.run(['x'], cwd=where())\n"
    )
    (spawn,) = find_spawns(snippet)
    assert spawn.problem is None


# --- the rule's parts ------------------------------------------------------------------------


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A clean registry of sandbox-writable trees for this test (its trees)."""
    registry = _host_process._Marked()
    monkeypatch.setattr(_host_process, "_marked", registry)
    return registry.trees


def test_python_runs_isolated() -> None:
    assert isolated_python("/venv/bin/python", "-m", "pip") == ["/venv/bin/python", "-I", "-m", "pip"]


@pytest.mark.usefixtures("marked")
def test_path_loses_relative_and_sandbox_writable_entries(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "bin").mkdir(parents=True)
    mark_sandbox_writable([workspace], python_env_read_only=True)
    path = os.pathsep.join(["", ".", "bin", str(workspace / "bin"), "/usr/bin", "/usr/bin", str(workspace)])
    assert host_search_path(path) == "/usr/bin"
    assert host_search_path(str(workspace)) == os.defpath


@pytest.mark.usefixtures("marked")
def test_executables_planted_in_a_sandbox_writable_path_entry_are_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    planted = workspace / "ipybox-planted-tool"
    planted.write_text("#!/bin/sh\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{workspace}{os.pathsep}/usr/bin")
    assert host_which(planted.name) == str(planted)  # control: found while the tree is not marked
    mark_sandbox_writable([workspace], python_env_read_only=True)
    assert host_which(planted.name) is None


@pytest.mark.usefixtures("marked")
def test_host_environment_has_no_python_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("PYTHONSTARTUP", "/somewhere/start.py")
    env = host_environment()
    assert not [key for key in env if key.startswith("PYTHON")]
    assert env["PATH"] == host_search_path()


@pytest.mark.usefixtures("marked")
def test_reads_from_writable_trees_are_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = home / "project"
    venv = workspace / ".venv"
    venv.mkdir(parents=True)
    mark_sandbox_writable([workspace], python_env_read_only=True)
    assert sandbox_can_write(HostRead("cache", home / ".cache")) is None  # a sibling of the workspace
    assert sandbox_can_write(HostRead("home", home, tree=False)) is None  # the workspace is inside it
    assert sandbox_can_write(HostRead("env", venv, python_env=True)) is None  # mounted read-only over it
    assert sandbox_can_write(HostRead("file", workspace / "x.whl")) is not None
    mark_sandbox_writable([home], python_env_read_only=False)
    assert sandbox_can_write(HostRead("home", home, tree=False)) is not None
    assert sandbox_can_write(HostRead("env", venv, python_env=True)) is not None
    with pytest.raises(
        ConfigError, match=r"refusing to run pip on the host: the home directory .* sandboxed code"
    ):
        refuse_sandbox_writable("pip", [HostRead("the home directory", home, tree=False)])


@pytest.mark.usefixtures("marked")
def test_a_writable_tree_inside_a_tool_directory_counts(tmp_path: Path) -> None:
    config = tmp_path / ".config"
    mark_sandbox_writable([config / "pip"], python_env_read_only=True)
    assert sandbox_can_write(HostRead("config", config)) == config / "pip"
    assert sandbox_can_write(HostRead("a PATH entry", config, tree=False)) is None


def test_marking_happens_when_a_sandbox_launcher_is_made(tmp_path: Path, marked: dict[str, bool]) -> None:
    require(
        sys.platform.startswith("linux") and host_which("bwrap") is not None, "bubblewrap is not installed"
    )
    (tmp_path / "extra").mkdir()
    launcher = sandbox_launcher(SandboxPolicy(allow_write=[Path("extra")]), workspace=tmp_path)
    try:
        assert {str(tmp_path), str(tmp_path / "extra")} <= set(marked)
    finally:
        launcher.close()


def test_trees_that_no_longer_exist_are_forgotten_past_a_bound(
    tmp_path: Path, marked: dict[str, bool]
) -> None:
    removed = [tmp_path / f"removed-{n}" for n in range(_host_process._PRUNE_ABOVE)]
    for tree in removed:
        tree.mkdir()
    mark_sandbox_writable(removed, python_env_read_only=True)
    for tree in removed:
        tree.rmdir()  # the sessions ended and their workspaces were removed
    live = tmp_path / "live"
    live.mkdir()
    mark_sandbox_writable([live], python_env_read_only=True)
    assert set(marked) == {str(live)}
    assert sandbox_can_write(HostRead("file", live / "x.whl")) == live
