"""Nothing outside ``executor/`` reaches into a ``CodeExecutor``: what ``Sessions`` and the service need
from one (shared tools, attaching a server, moving the workspace, taking its registrations) is public API."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"


def _executor_class(root: Path) -> ast.ClassDef:
    tree = ast.parse((root / "ipybox_core" / "executor" / "executor.py").read_text())
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "CodeExecutor")


def _own_names(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """The private names of ``CodeExecutor`` (attributes of ``self`` and methods starting with one
    underscore) and its public methods (properties with a setter are meant to be set: not those)."""
    private: set[str] = set()
    public: set[str] = set()
    settable: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
            if not name.startswith("__"):
                (private if name.startswith("_") else public).add(name)
            settable |= {setter for d in node.decorator_list if (setter := _setter_of(d))}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                private.add(node.attr)
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id.startswith("_")
        ):
            private.add(node.target.id)
    return private, public - settable


def _setter_of(decorator: ast.expr) -> str | None:
    """``x`` for an ``@x.setter`` decorator."""
    if (
        isinstance(decorator, ast.Attribute)
        and decorator.attr == "setter"
        and isinstance(decorator.value, ast.Name)
    ):
        return decorator.value.id
    return None


def back_doors(root: Path) -> list[str]:
    """Each place outside ``executor/`` that reads a private member of an executor, or replaces one of
    its methods (``executor.register_mcp_server = ...``), as ``path:line: code``."""
    private, public = _own_names(_executor_class(root))
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        if "executor" in path.relative_to(root).parts[:2]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and _is_executor(node.value):
                replaced = isinstance(node.ctx, ast.Store) and node.attr in public
                if node.attr in private or replaced:
                    found.append((str(path.relative_to(root)), node.lineno, ast.unparse(node)))
    return [f"{path}:{line}: {code}" for path, line, code in sorted(found)]


def _is_executor(value: ast.expr) -> bool:
    """Whether an expression names an executor (``executor``, ``ex``, ``session.executor``, ...)."""
    if isinstance(value, ast.Name):
        return value.id in {"executor", "ex", "exe"} or value.id.endswith("_executor")
    return isinstance(value, ast.Attribute) and value.attr == "executor"


def test_nothing_outside_the_executor_package_reads_its_private_members() -> None:
    assert back_doors(SRC) == []


def test_the_check_finds_a_back_door(tmp_path: Path) -> None:
    """Control: the check sees both kinds of back door where they are."""
    package = tmp_path / "ipybox_core"
    (package / "executor").mkdir(parents=True)
    (package / "executor" / "executor.py").write_text(
        (SRC / "ipybox_core" / "executor" / "executor.py").read_text()
    )
    (package / "user.py").write_text(
        "def use(session, executor):\n"
        "    executor._servers.clear()\n"
        "    session.executor._kernel = None\n"
        "    executor.register_mcp_server = print\n"
        "    executor.attach_server(None)\n"
    )
    assert [line.split(": ", 1)[1] for line in back_doors(tmp_path)] == [
        "executor._servers",
        "session.executor._kernel",
        "executor.register_mcp_server",
    ]


def test_the_typed_options_are_the_executors_keyword_arguments() -> None:
    """``ExecutorOptions`` (what ``Sessions(**options)`` and the adapters take) cannot drift from
    ``CodeExecutor.__init__``: an option added to one and not the other, or typed otherwise, fails here."""
    from ipybox_core.executor import CodeExecutor, ExecutorOptions

    def spelled(annotation: object) -> str:
        return str(getattr(annotation, "__forward_arg__", annotation))

    executor = {
        name: spelled(annotation)
        for name, annotation in CodeExecutor.__init__.__annotations__.items()
        if name not in ("return", "shared_tools")
    }
    assert {
        name: spelled(annotation) for name, annotation in ExecutorOptions.__annotations__.items()
    } == executor
