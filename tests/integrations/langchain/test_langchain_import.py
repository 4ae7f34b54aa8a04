"""Without LangChain installed, importing the adapter says what to install."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize("missing", ["langchain", "langgraph"])
def test_missing_framework_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    for name in list(sys.modules):
        if name.startswith("ipybox_integrations.langchain"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing.x` now fails like an absent package
    with pytest.raises(ImportError, match=r"in an ipybox checkout: pip install -e '\.\[langchain\]'"):
        importlib.import_module("ipybox_integrations.langchain")
    assert "ipybox_integrations.langchain" not in sys.modules


def test_the_integrations_package_does_not_import_langchain() -> None:
    import subprocess

    code = "import ipybox_integrations, sys; print(any(m.split('.')[0] in ('langchain', 'langgraph') for m in sys.modules))"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
