"""The code a gateway kernel executes to receive what a local kernel finds on disk: the runtime, the
bootstrap, the environment, generated packages."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import ipybox_core
from ipybox_core.errors import ConfigError
from ipybox_core.inkernel import _gateway_setup

_PACKAGE_DIR = Path(ipybox_core.__file__).parent
_SETUP_SOURCE = Path(_gateway_setup.__file__).read_text(encoding="utf-8")
_BOOTSTRAP_FILE = "ipybox_core/inkernel/_bootstrap.py"
_RUNTIME_INIT = (
    '"""ipybox\'s kernel side, shipped into this kernel by the application."""\n\n'
    "from ipybox_core.errors import (\n"
    "    IpyboxError, McpServerError, ToolError, ToolServerUnavailable, ToolTimeoutError\n"
    ")\n"
)


@dataclass(frozen=True)
class SetupReport:
    """What the kernel reports after its set-up."""

    root: str
    """The kernel's private directory (holds the runtime and the generated packages)."""
    real_root: str
    home: str
    cwd: str


def runtime_files() -> dict[str, str]:
    """The files every gateway kernel gets: the whole kernel-side package ``ipybox_core.inkernel``
    (runtime, errors, bootstrap, set-up, generated-package base), ``ipybox_core.runtime`` (its
    documented name for the runtime) and ``ipybox_core.errors`` (kernel code's one import for the
    errors it can get, also re-exported by ``ipybox_core``)."""
    inkernel = _PACKAGE_DIR / "inkernel"
    return {
        "ipybox_core/__init__.py": _RUNTIME_INIT,
        "ipybox_core/runtime.py": (_PACKAGE_DIR / "runtime.py").read_text(encoding="utf-8"),
        "ipybox_core/errors.py": (_PACKAGE_DIR / "errors.py").read_text(encoding="utf-8"),
        **{
            f"ipybox_core/inkernel/{path.name}": path.read_text(encoding="utf-8")
            for path in sorted(inkernel.glob("*.py"))
        },
    }


def setup_code(
    *,
    boot_id: str,
    packages: Mapping[str, Mapping[str, str]],
    env: Mapping[str, str],
    env_files: Mapping[str, str],
    python_path: Sequence[str],
    cwd: str | None,
    shell_approval: bool,
    output_limit: int,
    reset_cwd: bool,
) -> str:
    """A cell that installs the set-up module in the kernel and runs it (nothing leaks into the
    user's namespace)."""
    arguments = {
        "boot_id": boot_id,
        "files": runtime_files(),
        "packages": {path: dict(files) for path, files in packages.items()},
        "env": dict(env),
        "env_files": dict(env_files),
        "python_path": list(python_path),
        "cwd": cwd,
        "bootstrap_file": _BOOTSTRAP_FILE,
        "bootstrap_args": {"shell_approval": shell_approval, "output_limit": output_limit},
        "reset_cwd": reset_cwd,
    }
    name = _gateway_setup.MODULE_NAME
    return (
        "def __ipybox_gateway_setup__():\n"
        "    import sys, types\n"
        f"    module = types.ModuleType({name!r})\n"
        f"    exec(compile({_SETUP_SOURCE!r}, '<ipybox gateway setup>', 'exec'), module.__dict__)\n"
        f"    sys.modules[{name!r}] = module\n"
        f"    module.setup(**{arguments!r})\n"
        "__ipybox_gateway_setup__()\n"
        "del __ipybox_gateway_setup__\n"
    )


def sync_code(changes: Mapping[str, Mapping[str, str] | None]) -> str:
    """A cell that replaces or removes package directories in the kernel's private directory."""
    payload = {path: dict(files) if files is not None else None for path, files in changes.items()}
    return f"__import__('sys').modules[{_gateway_setup.MODULE_NAME!r}].sync({payload!r})\n"


def status_code() -> str:
    """A cell that prints the kernel's boot id once its set-up is complete (empty when it lost the
    set-up, e.g. restarted; the bootstrap's traceback if it failed)."""
    name = _gateway_setup.MODULE_NAME
    return f"getattr(__import__('sys').modules.get({name!r}), 'status', lambda: print(''))()\n"


def environment_code(env: Mapping[str, str], python_path: Sequence[str]) -> str:
    """A cell that sets environment variables and prepends ``sys.path`` entries."""
    return (
        f"__import__('os').environ.update({dict(env)!r})\n"
        f"__import__('sys').path[:0] = [p for p in {list(python_path)!r}"
        " if p not in __import__('sys').path]\n"
    )


def parse_report(text: str) -> SetupReport | None:
    for line in text.splitlines():
        if line.startswith(_gateway_setup.REPORT_PREFIX):
            data = json.loads(line[len(_gateway_setup.REPORT_PREFIX) :])
            return SetupReport(
                root=str(data["root"]),
                real_root=str(data["real_root"]),
                home=str(data["home"]),
                cwd=str(data["cwd"]),
            )
    return None


def check_package_path(path: str) -> str:
    """A package directory relative to the kernel's private directory, e.g. ``mcptools/github``."""
    parts = path.split("/")
    if not path or any(not part.isidentifier() for part in parts):
        raise ConfigError(f"a shipped package path must be dotted-name parts joined by '/', got {path!r}")
    return path


def read_package_files(directory: Path) -> dict[str, str]:
    """The text files of a local package directory (relative path → text), without caches."""
    files: dict[str, str] = {}
    for current, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(current) / name
            files[path.relative_to(directory).as_posix()] = path.read_text(encoding="utf-8")
    return files
