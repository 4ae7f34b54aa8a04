"""Generate the typed Python package of one MCP server: ``<root>/<module>/`` (``mcptools.<module>``)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipybox_core.codegen._assign import assign_shape, attribute_reserved, function_names, model_names
from ipybox_core.codegen._ir import ToolShape
from ipybox_core.codegen._names import NameScope, file_module_name, module_name
from ipybox_core.codegen._render import (
    model_line,
    models_in_order,
    module_source,
    ordered_params,
    package_doc,
)
from ipybox_core.codegen._schema import degraded_shape, tool_shape
from ipybox_core.codegen._source import docstring, scrub, summary
from ipybox_core.codegen._writer import MARKER, remove_package, write_package
from ipybox_core.errors import CodegenError
from ipybox_core.mcp.types import ToolInfo

MAX_NOTES_PER_TOOL = 8

APP_ONLY = "for an MCP App's UI only"
"""Why an app-only tool has no function (:attr:`GeneratedPackage.left_out`)."""

_BASE_SOURCE = (Path(__file__).parent.parent / "inkernel" / "_generated_base.py").read_text(encoding="utf-8")


class CodegenWarning(UserWarning):
    """A tool's schema could not be fully expressed in Python; the message names server and tool."""


@dataclass(frozen=True)
class GeneratedModel:
    """A pydantic model class of a generated package."""

    name: str
    line: str
    """The model on one line, for prompts: ``class Address: street: str; zip: str | None = None``."""
    description: str = ""


@dataclass(frozen=True)
class GeneratedTool:
    """One generated function."""

    tool: str
    """The MCP tool name (wire name)."""
    function: str
    """The Python function name (``from mcptools.<module> import <function>``)."""
    signature: str
    """``def search_repos(*, query: str, limit: int = 10) -> SearchResult`` (compact annotations)."""
    summary: str
    """First line of the description, at most about 160 characters."""
    description: str
    module: str
    """Module path inside the package (``_tools.search_repos``)."""
    arguments: dict[str, str] = field(default_factory=dict)
    """Keyword-argument name → wire (property) name, in signature order."""
    models: tuple[str, ...] = ()
    """Models the signature uses, directly or through their fields."""
    warnings: tuple[str, ...] = ()
    """What could not be expressed in Python (those parts are typed ``Any``)."""
    degraded: bool = False
    """The schema could not be converted at all: arguments and result are untyped."""


@dataclass(frozen=True)
class GeneratedPackage:
    """The generated package of one MCP server."""

    server: str
    """The server's registered (wire) name, used for calls."""
    module: str
    """The Python package name under the root (``github`` for ``mcptools.github``)."""
    path: Path
    tools: list[GeneratedTool] = field(default_factory=list)
    models: dict[str, GeneratedModel] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    """Tools the server lists that got no function: MCP tool name → why (e.g. :data:`APP_ONLY`).
    The API reference and ``help()`` on the package name them, so an agent does not look for them."""

    def tool(self, name: str) -> GeneratedTool:
        """The generated tool with wire name or function name ``name``."""
        for tool in self.tools:
            if name in (tool.tool, tool.function):
                return tool
        raise KeyError(name)

    @property
    def warnings(self) -> list[str]:
        return [note for tool in self.tools for note in tool.warnings]


def server_module_name(server: str) -> str:
    """The package name a server's tools are generated into (``my-server`` → ``my_server``)."""
    return module_name(server)


class _Notes:
    """Collects a tool's codegen warnings (deduplicated, capped)."""

    def __init__(self, server: str, tool: str) -> None:
        self.prefix = f"MCP server {server!r}, tool {tool!r}: "
        self.items: list[str] = []
        self.dropped = 0

    def add(self, message: str) -> None:
        text = self.prefix + message
        if text in self.items:
            return
        if len(self.items) >= MAX_NOTES_PER_TOOL:
            self.dropped += 1
            return
        self.items.append(text)

    def all(self) -> tuple[str, ...]:
        if self.dropped:
            return (*self.items, f"{self.prefix}... and {self.dropped} more schema problems")
        return tuple(self.items)


@dataclass
class _Pending:
    info: ToolInfo
    function: str
    shape: ToolShape
    notes: _Notes
    degraded: bool


def generate_server_package(
    server: str,
    tools: Sequence[ToolInfo],
    root: Path | str,
    *,
    module: str | None = None,
    include_app_only: bool = False,
) -> GeneratedPackage:
    """Generate ``<root>/<module>/`` for ``server`` and replace any earlier one in one step.

    Tools are sorted by name. A tool whose schema cannot be (fully) expressed still gets a
    function, with ``Any`` types where needed, and a :class:`CodegenWarning` naming it. Raises
    :class:`CodegenError` only if no valid module could be produced for a tool (then nothing is
    written), or if ``<root>/<module>`` exists and was not generated by ipybox. Tools for an MCP
    App's UI only (:attr:`ToolInfo.app_only`) are left out unless ``include_app_only``.

    ``root``'s parent is trusted; below it (``root`` itself, the package, every file) nothing is
    followed: a symlink, FIFO or hard link planted there (sandboxed code may write the workspace)
    raises :class:`~ipybox_core.errors.UnsafePathError` and nothing is written outside ``root``.
    """
    root = Path(root)
    module = module or server_module_name(server)
    app_only = [] if include_app_only else sorted(t.name for t in tools if t.app_only)
    left_out = dict.fromkeys(app_only, APP_ONLY)
    tools = [tool for tool in tools if tool.name not in left_out]
    files, generated, models = build_package_files(server, tools, left_out)
    for tool in generated:
        for note in tool.warnings:
            warnings.warn(CodegenWarning(note), stacklevel=2)
    path = write_package(root, module, files)
    return GeneratedPackage(
        server=server, module=module, path=path, tools=generated, models=models, left_out=left_out
    )


def build_package_files(
    server: str, tools: Sequence[ToolInfo], left_out: dict[str, str] | None = None
) -> tuple[dict[str, str], list[GeneratedTool], dict[str, GeneratedModel]]:
    """The package's files (relative path → source, each compiled once as a check), in memory."""
    pending = _convert_all(server, tools)
    model_names((p.shape for p in pending), taken={p.function for p in pending})
    reserved = attribute_reserved(m.name for p in pending for m in p.shape.models)
    files: dict[str, str] = {
        "_base.py": _BASE_SOURCE,
        "_tools/__init__.py": '"""Generated tool modules."""\n',
    }
    generated: list[GeneratedTool] = []
    models: dict[str, GeneratedModel] = {}
    exports: dict[str, str] = {}
    file_scope = NameScope(["__init__"], casefold=True)
    for item in pending:
        file_module = file_scope.claim(file_module_name(item.function))
        source, tool = _render_tool(server, item, reserved, f"_tools.{file_module}")
        files[f"_tools/{file_module}.py"] = source
        generated.append(tool)
        exports[item.function] = file_module
        if not item.degraded:
            for model in models_in_order(item.shape):
                exports.setdefault(model.name, file_module)
                models.setdefault(
                    model.name, GeneratedModel(model.name, model_line(model), model.description)
                )
    model_lines = [m.line for m in models.values()]
    files["__init__.py"] = _init_source(server, generated, exports, model_lines, left_out or {})
    return files, generated, models


def remove_server_package(server: str, root: Path | str, *, module: str | None = None) -> bool:
    """Delete the generated package of ``server``; ``False`` when there was none.

    Nothing below ``root``'s parent is followed (see :func:`generate_server_package`).
    """
    return remove_package(Path(root), module or server_module_name(server))


def kernel_reload_code(module: str, package: str = "mcptools") -> str:
    """Python code for a kernel that already imported ``<package>.<module>``: forget it, so the next
    import loads the regenerated package (run it after :func:`generate_server_package`)."""
    prefix = f"{package}.{module}"
    return (
        "import importlib as _il, sys as _sys\n"
        f"for _name in [n for n in _sys.modules if n == {prefix!r} or n.startswith({prefix + '.'!r})]:\n"
        "    del _sys.modules[_name]\n"
        f"if {package!r} in _sys.modules:\n"
        f"    _sys.modules[{package!r}].__dict__.pop({module!r}, None)\n"
        "_il.invalidate_caches()\n"
        "del _il, _sys\n"
    )


def _convert_all(server: str, tools: Sequence[ToolInfo]) -> list[_Pending]:
    unique: dict[str, ToolInfo] = {}
    for info in sorted(tools, key=lambda t: t.name):
        if info.name in unique:
            warnings.warn(
                CodegenWarning(
                    f"MCP server {server!r} lists tool {info.name!r} twice; the first one is used"
                ),
                stacklevel=3,
            )
            continue
        unique[info.name] = info
    functions = function_names(list(unique))
    pending = []
    for name, info in unique.items():
        notes = _Notes(server, name)
        description = info.description or ""
        degraded = False
        try:
            shape = tool_shape(
                info.input_schema,
                info.output_schema,
                function=functions[name],
                description=description,
                warn=notes.add,
            )
        except Exception as error:  # a schema the converter did not foresee: keep the tool usable
            notes.add(
                f"schema not understood ({type(error).__name__}: {error}); arguments and result typed as Any"
            )
            shape = degraded_shape(info.input_schema, info.output_schema, description=description)
            degraded = True
        pending.append(_Pending(info, functions[name], shape, notes, degraded))
    return pending


def _render_tool(
    server: str, item: _Pending, reserved: frozenset[str], module: str
) -> tuple[str, GeneratedTool]:
    info = item.info
    item.shape.notes = tuple(note.removeprefix(item.notes.prefix) for note in item.notes.all())
    try:
        kwargs_name = assign_shape(item.shape, reserved)
        rendered = module_source(server, info.name, item.function, item.shape, kwargs_name)
        _check(rendered.source, info.name, server)
    except Exception as error:
        if item.degraded:
            raise CodegenError(
                f"could not generate tool {info.name!r} of MCP server {server!r}: {error}"
            ) from error
        item.notes.add(
            f"code generation failed ({type(error).__name__}: {error}); arguments and result typed as Any"
        )
        item.shape = degraded_shape(info.input_schema, info.output_schema, description=item.shape.description)
        item.degraded = True
        return _render_tool(server, item, reserved, module)
    tool = GeneratedTool(
        tool=info.name,
        function=item.function,
        signature=rendered.signature,
        summary=summary(info.description or "") or summary(info.title or info.annotations.title or ""),
        description=scrub(info.description or ""),
        module=module,
        arguments={f.kwarg: f.wire for f in ordered_params(item.shape)},
        models=() if item.degraded else rendered.models,
        warnings=item.notes.all(),
        degraded=item.degraded,
    )
    return rendered.source, tool


def _check(source: str, tool: str, server: str) -> None:
    """Compile the module (catches what ``ast.parse`` does, plus e.g. duplicate arguments)."""
    try:
        compile(source, f"<ipybox codegen: {server!r}, {tool!r}>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise CodegenError(
            f"generated code for tool {tool!r} of MCP server {server!r} is invalid: {error}"
        ) from error


def _init_source(
    server: str,
    tools: list[GeneratedTool],
    exports: dict[str, str],
    models: list[str],
    left_out: dict[str, str],
) -> str:
    doc = package_doc(
        f"MCP server {server!r} {MARKER}.", [(t.signature, t.summary) for t in tools], models, left_out
    )
    names = [t.function for t in tools]
    tool_map: dict[str, Any] = {t.function: t.tool for t in tools}
    return f'''{docstring(doc, "")}

import importlib as _importlib
import sys as _sys
import types as _types

SERVER = {server!r}
"""The MCP server's registered name."""
TOOLS = {tool_map!r}
"""Function name → MCP tool name."""

LEFT_OUT = {left_out!r}
"""Tools the server lists that have no function here: MCP tool name → why."""

_EXPORTS = {exports!r}
_FUNCTIONS = {names!r}


class _Package(_types.ModuleType):
    """Imports a tool's module on first use (keeps ``import`` of large servers fast)."""

    @property
    def __all__(self) -> list[str]:
        """The functions (``from ... import *``); pydoc is told of none: the docstring lists each once."""
        if _sys._getframe(1).f_globals.get("__name__") == "pydoc":
            raise AttributeError("__all__")
        return list(_FUNCTIONS)

    def __getattr__(self, name: str) -> object:
        module = _EXPORTS.get(name)
        if module is None:
            why = f" (the tool {{name!r}} is left out: {{LEFT_OUT[name]}})" if name in LEFT_OUT else ""
            raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}{{why}}")
        value = getattr(_importlib.import_module(f"{{__name__}}._tools.{{module}}"), name)
        globals()[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted({{*globals(), *_EXPORTS}})


_sys.modules[__name__].__class__ = _Package
'''
