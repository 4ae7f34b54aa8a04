"""The kernel's ``agent_tools`` package: host tools through the MCP tools' code generation."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ipybox_core.codegen import (
    GeneratedPackage,
    api_reference,
    generate_server_package,
    remove_server_package,
)
from ipybox_core.codegen.package import build_package_files
from ipybox_core.hosttools._backend import HostTools
from ipybox_core.hosttools._tool import HOST_SERVER

HOST_ROOT = "hostapi"
"""The directory (in an executor's private runtime directory) whose ``agent_tools`` package the
kernel imports: on its ``sys.path`` ahead of the workspace, so a workspace directory of that name
does not hide it."""

HOST_NAME_TAKEN = (
    f"the name {HOST_SERVER!r} belongs to the host tools (from agent_tools import ...): register "
    "the MCP server under another name"
)

_TOP_LEVEL = "\x00"  # marks the host package in a combined reference: imported as a top-level package


def write_host_package(tools: HostTools, root: Path) -> GeneratedPackage | None:
    """Generate ``<root>/agent_tools/`` for ``tools`` (``None`` and no package when there are none)."""
    if not tools:
        remove_server_package(HOST_SERVER, root, module=HOST_SERVER)
        return None
    return generate_server_package(HOST_SERVER, tools.infos(), root, module=HOST_SERVER)


def host_reference(tools: HostTools, *, package: str) -> str:
    """The API reference of ``tools`` alone, generated in memory (``""``: none): what an
    application shows when its kernel lives in an ipybox service."""
    if not tools:
        return ""
    _, generated, models = build_package_files(HOST_SERVER, tools.infos())
    unwritten = GeneratedPackage(HOST_SERVER, HOST_SERVER, Path(HOST_SERVER), generated, models)
    return combined_reference([], unwritten, package=package, max_chars=None)


def combined_reference(
    packages: Sequence[GeneratedPackage],
    host: GeneratedPackage | None,
    *,
    package: str,
    max_chars: int | None,
) -> str:
    """The API reference of MCP ``packages`` (``from <package>.<server> import ...``) and of the
    host tools (``from agent_tools import ...``), sharing one ``max_chars`` budget."""
    shown = list(packages)
    if host is not None:
        shown.append(dataclasses.replace(host, module=_TOP_LEVEL + host.module))
    if not shown:
        return ""
    text = api_reference(shown, max_chars=max_chars, package=package)
    return text.replace(f"{package}.{_TOP_LEVEL}", "")


def host_reload_code() -> str:
    """Python code for a kernel that imported ``agent_tools``: forget it (the next import loads the
    regenerated package)."""
    return (
        "import importlib as _il, sys as _sys\n"
        f"for _name in [n for n in _sys.modules if n.split('.')[0] == {HOST_SERVER!r}]:\n"
        "    del _sys.modules[_name]\n"
        "_il.invalidate_caches()\n"
        "del _il, _sys\n"
    )
