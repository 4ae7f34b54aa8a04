"""The kernel side imports with the standard library only: every file a gateway kernel gets (the
whole ``ipybox_core.inkernel`` package, ``ipybox_core.runtime``, ``ipybox_core.errors``) is imported
in a bare interpreter (``python -I -S``: no site-packages) that fails on any import outside the
standard library and those files. The one exception, ``inkernel._generated_base`` (copied into
generated packages, whose models are pydantic models), may import pydantic and its dependencies
and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pydantic

import ipybox_core.inkernel
from ipybox_core.kernel.gateway._shipping import runtime_files

PYDANTIC_MODULE = "ipybox_core.inkernel._generated_base"
PYDANTIC_AND_ITS_DEPENDENCIES = (
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
)

_CHECK = r"""
import importlib, json, sys
allowed, modules = json.loads(sys.argv[2]), json.loads(sys.argv[3])
class Refuse:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        stdlib = top in sys.stdlib_module_names or top.startswith("_sysconfigdata_")  # platform data
        if not stdlib and top not in allowed and top != "ipybox_core":
            raise ImportError(f"kernel-side code imported {name!r}, which is not in the standard library")
        return None
sys.meta_path.insert(0, Refuse())
for module in modules:
    importlib.import_module(module)
assert sys.modules["ipybox_core.runtime"] is sys.modules["ipybox_core.inkernel.runtime"]
bootstrap = sys.argv[1]
exec(compile(open(bootstrap).read(), bootstrap, "exec"), {"__name__": "bootstrap"})
print("ok")
"""


def _modules(files: dict[str, str]) -> list[str]:
    """The importable modules among ``files``."""
    paths = [p for p in files if p.endswith(".py")]
    return sorted(p.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for p in paths)


def _check(
    root: Path, files: dict[str, str], modules: list[str], allowed: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    import json

    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    extra = [str(Path(pydantic.__file__).parent.parent)] if allowed else []
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = [{str(root)!r}]; sys.path += {extra!r}\n" + _CHECK,
            str(root / "ipybox_core" / "inkernel" / "_bootstrap.py"),
            json.dumps(list(allowed)),
            json.dumps(["ipybox_core.runtime", *modules]),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
    )


def test_every_file_of_the_kernel_side_package_is_shipped() -> None:
    package = Path(ipybox_core.inkernel.__file__).parent
    shipped = {p for p in runtime_files() if p.startswith("ipybox_core/inkernel/")}
    assert shipped == {f"ipybox_core/inkernel/{p.name}" for p in package.glob("*.py")}
    assert {"ipybox_core.inkernel.runtime", "ipybox_core.inkernel.errors", PYDANTIC_MODULE} <= set(
        _modules(runtime_files())
    )


def test_the_kernel_side_imports_with_the_standard_library_only(tmp_path: Path) -> None:
    files = runtime_files()
    result = _check(tmp_path, files, [m for m in _modules(files) if m != PYDANTIC_MODULE])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_the_generated_base_imports_pydantic_and_nothing_else(tmp_path: Path) -> None:
    result = _check(tmp_path, runtime_files(), [PYDANTIC_MODULE], PYDANTIC_AND_ITS_DEPENDENCIES)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_a_third_party_import_fails_the_check(tmp_path: Path) -> None:
    files = dict(runtime_files())
    files["ipybox_core/inkernel/_gateway_setup.py"] += "\nimport pydantic\n"
    result = _check(tmp_path, files, [m for m in _modules(files) if m != PYDANTIC_MODULE])
    assert result.returncode != 0
    assert "'pydantic'" in result.stderr


def test_the_generated_base_may_not_import_more_than_pydantic(tmp_path: Path) -> None:
    files = dict(runtime_files())
    files["ipybox_core/inkernel/_generated_base.py"] += "\nimport httpx\n"
    result = _check(tmp_path, files, [PYDANTIC_MODULE], PYDANTIC_AND_ITS_DEPENDENCIES)
    assert result.returncode != 0
    assert "'httpx'" in result.stderr
