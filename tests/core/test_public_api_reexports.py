"""``from ipybox_core import CodeExecutor`` must type-check in applications that run ``mypy --strict``.

Under ``--strict`` (``no_implicit_reexport``) mypy accepts a name imported from a package only if the
package re-exports it explicitly: imported as ``import X as X`` or listed in a *literal* ``__all__``.
``ipybox_core/__init__.py`` imports its public names lazily, so ``__all__`` must stay a literal list
(a computed one made every name fail with ``Module "ipybox_core" does not explicitly export
attribute "CodeExecutor"``). A real mypy run takes ~16 s, so this test checks the rule on the source.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ipybox_core

INIT = Path(ipybox_core.__file__)


def explicit_reexports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names if alias.asname == alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            is_all = any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
            if is_all and isinstance(node.value, (ast.List, ast.Tuple)):
                names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return names


def test_every_public_name_is_an_explicit_reexport() -> None:
    missing = sorted(set(ipybox_core.__all__) - explicit_reexports(ast.parse(INIT.read_text())))
    assert missing == []


def test_every_public_name_is_importable() -> None:
    for name in ipybox_core.__all__:
        assert getattr(ipybox_core, name) is not None
