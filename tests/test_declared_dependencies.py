"""Every third-party package that ``src/`` imports is declared in ``pyproject.toml``.

ipybox_core may import only its core dependencies (plus the few optional ones named below, each from
its extra); each framework integration may also import its extra's packages. A new import without a
declaration, or without an entry in :data:`DISTRIBUTION`, fails here.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

DISTRIBUTION = {
    "IPython": "ipython",
    "agents": "openai-agents",
    "annotated_types": "annotated-types",
    "anyio": "anyio",
    "dotenv": "python-dotenv",
    "httpx2": "httpx2",
    "ipykernel": "ipykernel",
    "jupyter_client": "jupyter-client",
    "langchain": "langchain",
    "langchain_core": "langchain-core",
    "jsonschema": "jsonschema",
    "langgraph": "langgraph",
    "matplotlib": "matplotlib",
    "mcp": "mcp",
    "mcp_types": "mcp-types",
    "openai": "openai",
    "packaging": "packaging",
    "psutil": "psutil",
    "pydantic": "pydantic",
    "pydantic_ai": "pydantic-ai-slim",
    "pydantic_core": "pydantic-core",
    "pyseccomp": "pyseccomp",
    "starlette": "starlette",
    "typing_extensions": "typing-extensions",
    "uvicorn": "uvicorn",
    "websockets": "websockets",
    "zmq": "pyzmq",
}
"""Top-level import name → the distribution that provides it."""

EXTRA_OF_PACKAGE = {
    "ipybox_integrations/pydantic_ai": "pydantic-ai",
    "ipybox_integrations/langchain": "langchain",
    "ipybox_integrations/openai_agents": "openai-agents",
}
OPTIONAL_IN_CORE = {"websockets": "gateway"}
"""Imports of ipybox_core that only an optional feature makes (imported where it is used)."""


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(item) for item in project["dependencies"]}
    extras = {
        extra: {_name(item) for item in items} for extra, items in project["optional-dependencies"].items()
    }
    return core, extras


def _third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and not top.startswith("ipybox_"):
                found.add(top)
    return found


def _allowed(path: Path, core: set[str], extras: dict[str, set[str]], module: str) -> set[str]:
    relative = path.relative_to(SRC).as_posix()
    allowed = set(core)
    for package, extra in EXTRA_OF_PACKAGE.items():
        if relative.startswith(package):
            allowed |= extras[extra]
    if module in OPTIONAL_IN_CORE:
        allowed |= extras[OPTIONAL_IN_CORE[module]]
    return allowed


def test_every_imported_package_is_a_declared_dependency() -> None:
    core, extras = _declared()
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        for module in sorted(_third_party_imports(path)):
            distribution = DISTRIBUTION.get(module)
            if distribution is None:
                problems.append(f"{path.relative_to(ROOT)}: imports {module!r}: add it to DISTRIBUTION")
            elif _name(distribution) not in _allowed(path, core, extras, module):
                problems.append(
                    f"{path.relative_to(ROOT)}: imports {module!r}, but {distribution} is not declared"
                )
    assert not problems, "\n".join(problems)


def test_the_scan_sees_imports_inside_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import zmq.asyncio\n"
        "def f():\n    from psutil import Process\n    from . import sibling\n    import ipybox_core\n"
    )
    assert _third_party_imports(sample) == {"zmq", "psutil"}
