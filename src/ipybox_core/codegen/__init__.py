"""JSON Schema → typed Python packages for MCP tools, and their compact reference for prompts.

``generate_server_package("github", tools, root)`` writes ``<root>/github/`` (importable as
``mcptools.github`` when ``root`` is ``.../mcptools``): one keyword-argument function per tool,
pydantic models for nested objects and structured results. ``api_reference(packages)`` is the
text that tells an agent what it can call.
"""

from ipybox_core.codegen.package import (
    CodegenWarning,
    GeneratedModel,
    GeneratedPackage,
    GeneratedTool,
    generate_server_package,
    kernel_reload_code,
    remove_server_package,
    server_module_name,
)
from ipybox_core.codegen.reference import api_reference
from ipybox_core.errors import CodegenError

__all__ = [
    "CodegenError",
    "CodegenWarning",
    "GeneratedModel",
    "GeneratedPackage",
    "GeneratedTool",
    "api_reference",
    "generate_server_package",
    "kernel_reload_code",
    "remove_server_package",
    "server_module_name",
]
