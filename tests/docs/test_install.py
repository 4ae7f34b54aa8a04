"""Installing: every documented install line installs THIS project (the package index's ``ipybox`` is
an older, different project), and the built wheel works in a fresh virtualenv as the docs say."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from docs_kit import DOCS, README, ROOT
from packaging.version import Version

from ipybox_core.cli import main

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NEWEST_INDEX_RELEASE = Version("0.9.2")
"""The newest release of the name ``ipybox`` on the package index (another project)."""

_PIP = re.compile(r"\b(?:pip3?|uv pip) install\b(?P<args>[^`\n#;&|)]*)")
_UVX = re.compile(r"\buvx\b(?P<args>[^`\n#;&|]*)")
_UVX_JSON = re.compile(r'"command":\s*"uvx",\s*"args":\s*(\[[^\]]*\])', re.DOTALL)
_EXTRAS = re.compile(r"\[(?P<extras>[\w,-]+)\]$")


def documented_texts() -> dict[str, str]:
    """Where a new user reads install lines: README, docs pages, the plugin, examples, ``ipybox mcp --help``."""
    files = [README, ROOT / "plugin" / "README.md", *DOCS.rglob("*.md"), *(ROOT / "examples").glob("*.py")]
    texts = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in files}
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text):
        assert main(["mcp", "--help"]) == 0
    texts["ipybox mcp --help"] = help_text.getvalue()
    return texts


def words(text: str) -> list[str]:
    """Shell words; text cut mid-quote (a JSON line) falls back to plain words."""
    try:
        return shlex.split(text)
    except ValueError:
        return [word.strip("\"',[]") for word in text.split()]


def uvx_commands(text: str) -> list[list[str]]:
    """The arguments of every ``uvx`` command line and of every ``"command": "uvx"`` JSON entry."""
    found = [words(match["args"]) for match in _UVX.finditer(text) if not match["args"].startswith('"')]
    found += [json.loads(match[1]) for match in _UVX_JSON.finditer(text)]
    return found


def is_local(target: str) -> bool:
    """A checkout path or a wheel file, never a name looked up on the index."""
    path = _EXTRAS.sub("", target)
    return path.startswith((".", "/", "~", "<", "$")) or "/" in path or path.endswith(".whl")


def check_target(target: str, where: str) -> list[str]:
    problems = []
    if not is_local(target):
        problems.append(f"{where}: {target!r} installs from the package index, not this project")
    extras = _EXTRAS.search(target)
    for extra in extras["extras"].split(",") if extras else []:
        if extra not in PYPROJECT["optional-dependencies"]:
            problems.append(f"{where}: {target!r} names the extra {extra!r}, which pyproject.toml lacks")
    wheel = re.search(r"ipybox-([^-]+)-py3-none-any\.whl", target)
    if wheel and wheel[1] != PYPROJECT["version"]:
        problems.append(f"{where}: {target!r} is not the wheel of version {PYPROJECT['version']}")
    return problems


def test_the_version_sorts_above_every_release_on_the_index() -> None:
    assert Version(PYPROJECT["version"]) > NEWEST_INDEX_RELEASE


def test_plotting_is_the_plot_extra_and_all_includes_it() -> None:
    assert not any(dep.startswith("matplotlib") for dep in PYPROJECT["dependencies"])
    extras = PYPROJECT["optional-dependencies"]
    assert [dep for dep in extras["plot"] if dep.startswith("matplotlib")]
    assert "plot" in re.search(r"ipybox\[(.*)\]", extras["all"][0])[1].split(",")  # type: ignore[index]


def test_every_install_line_installs_this_project() -> None:
    problems: list[str] = []
    pip_lines = uvx_lines = 0
    for where, text in documented_texts().items():
        for match in _PIP.finditer(text):
            tokens = [token for token in words(match["args"]) if not token.startswith("-")]
            targets = [token for token in tokens if "ipybox" in token or token.startswith(".")]
            pip_lines += bool(targets)
            for target in targets:
                problems += check_target(target, where)
        for tokens in uvx_commands(text):
            if "ipybox" not in tokens:
                continue
            uvx_lines += 1
            if tokens[:1] != ["--from"] or not is_local(tokens[1]):
                problems.append(f"{where}: uvx {tokens} runs the index's ipybox: use --from CHECKOUT")
    assert not problems, "\n".join(problems)
    assert pip_lines >= 15 and uvx_lines >= 3, (pip_lines, uvx_lines)  # the scan found the lines


def test_the_checker_rejects_index_names() -> None:
    assert check_target("ipybox", "x") and check_target("ipybox[all]", "x")
    assert check_target(".[no-such-extra]", "x")
    assert check_target("dist/ipybox-0.1.0-py3-none-any.whl", "x")
    assert not check_target(".[plot]", "x") and not check_target("/path/to/ipybox[langchain]", "x")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as the README says to build it (``pip wheel --no-deps -w dist .``)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("*.whl")
    assert built.name == f"ipybox-{PYPROJECT['version']}-py3-none-any.whl"
    return built


@pytest.mark.slow
def test_the_wheel_in_a_fresh_virtualenv_runs_the_quickstart(wheel: Path, tmp_path: Path) -> None:
    """A virtualenv outside the repository, the wheel installed into it (dependencies from the index
    or pip's cache), then ``python quickstart.py --yes`` as docs/quickstart.md runs it. The venv has
    no pip of its own: this pip installs into it (``--python``), which spares seconds of ensurepip."""
    venv = tmp_path / "venv"
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    python = venv / "bin" / "python"
    for command in (
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
    shutil.copy(ROOT / "examples" / "quickstart.py", tmp_path / "quickstart.py")
    done = subprocess.run(
        [str(python), "quickstart.py", "--yes"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "ordered 'Structure and Interpretation of Computer Programs' for 48.0 USD: ord-1001" in done.stdout
    checks = (
        "import importlib.metadata as m, importlib.util as u, ipybox_core\n"
        "print(ipybox_core.__file__, m.version('ipybox'), u.find_spec('matplotlib') is None)"
    )
    where, version, no_matplotlib = subprocess.run(
        [str(python), "-c", checks], capture_output=True, text=True, timeout=60, env=env, check=True
    ).stdout.split()
    assert where.startswith(str(venv)) and version == PYPROJECT["version"]
    assert no_matplotlib == "True"  # plotting is the ``plot`` extra
