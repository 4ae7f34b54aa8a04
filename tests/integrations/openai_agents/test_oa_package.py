"""The module without the SDK installed, and the proxy tool names."""

from __future__ import annotations

import importlib
import sys

import pytest

from ipybox_integrations.openai_agents import proxy_identity


def test_proxy_names() -> None:
    assert proxy_identity("shop", "place_order") == ("place_order", "shop")
    assert proxy_identity("weather", "weather") == ("weather.weather", None)  # the SDK reserves ns == name
    assert proxy_identity("", "shell", shell=True) == ("shell", None)


def test_missing_sdk_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [
        m
        for m in sys.modules
        if m == "ipybox_integrations.openai_agents" or m.startswith("ipybox_integrations.openai_agents.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "agents", None)  # what an uninstalled package looks like to import
    with pytest.raises(ImportError, match=r"in an ipybox checkout: pip install -e '\.\[openai-agents\]'"):
        importlib.import_module("ipybox_integrations.openai_agents")
