"""The kernel side imports with the standard library only: the files a gateway kernel gets (the
``ipybox_core.inkernel`` package, ``ipybox_core.runtime``, ``ipybox_core.errors``, the bootstrap)
are imported in a bare interpreter (``python -I -S``: no site-packages) that fails on any import
outside the standard library and those files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ipybox_core.kernel.gateway._shipping import runtime_files

_CHECK = r"""
import importlib, sys
shipped = set(sys.argv[2:])
class Refuse:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in sys.stdlib_module_names and name not in shipped and top != "ipybox_core":
            raise ImportError(f"kernel-side code imported {name!r}, which is not in the standard library")
        return None
sys.meta_path.insert(0, Refuse())
for module in sys.argv[2:]:
    importlib.import_module(module)
bootstrap = sys.argv[1]
exec(compile(open(bootstrap).read(), bootstrap, "exec"), {"__name__": "bootstrap"})
print("ok")
"""


def _modules(files: dict[str, str]) -> list[str]:
    """The importable modules among ``files`` (the bootstrap is executed, not imported)."""
    paths = [p for p in files if p.endswith(".py") and "bootstrap" not in p]
    return sorted(p.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for p in paths)


def _check(root: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    bootstrap = next(root / p for p in files if "bootstrap" in p)
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(root)!r})\n" + _CHECK,
            str(bootstrap),
            *_modules(files),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
    )


def test_the_kernel_side_imports_with_the_standard_library_only(tmp_path: Path) -> None:
    files = runtime_files()
    assert "ipybox_core.inkernel.errors" in _modules(files)
    result = _check(tmp_path, files)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_a_third_party_import_fails_the_check(tmp_path: Path) -> None:
    files = dict(runtime_files())
    files["ipybox_core/inkernel/errors.py"] += "\nimport pydantic\n"
    result = _check(tmp_path, files)
    assert result.returncode != 0
    assert "'pydantic'" in result.stderr
