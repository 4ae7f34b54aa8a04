"""SandboxPolicy: defaults, validation, loading from TOML/JSON files, resolve_sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ipybox_core.errors import ConfigError
from ipybox_core.sandbox import DEFAULT_HIDDEN_PATHS, ResourceLimits, SandboxPolicy, resolve_sandbox
from ipybox_core.sandbox._proxy import HostFilter


def test_defaults_deny_network_and_hide_secrets() -> None:
    policy = SandboxPolicy()
    assert policy.network is False and policy.allow_hosts == ()
    assert policy.allow_read == () and policy.allow_write == ()
    for secret in ("~/.ssh", "~/.aws", "~/.config/gcloud", "~/.netrc", "~/.git-credentials", "/etc/shadow"):
        assert secret in policy.hidden_paths
    assert ".env" in policy.hidden_names and ".env.*" in policy.hidden_names
    assert policy.limits.memory_mb == 4096 and policy.limits.max_processes is not None


def test_policy_is_immutable() -> None:
    with pytest.raises(ValidationError):
        SandboxPolicy().network = True  # type: ignore[misc]


def test_total_memory_defaults_to_twice_the_process_limit_plus_tmp() -> None:
    assert ResourceLimits(memory_mb=1000, tmp_size_mb=100).effective_total_memory_mb == 2100
    assert ResourceLimits(memory_mb=1000, total_memory_mb=1500).effective_total_memory_mb == 1500
    assert ResourceLimits(memory_mb=None).effective_total_memory_mb is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"network": True, "allow_hosts": ["pypi.org"]}, "already opens every host"),
        ({"allow_hosts": ["http://pypi.org"]}, "invalid host"),
        ({"system_paths": ["usr"]}, "must be absolute"),
        ({"limits": {"memory_mb": 0}}, "greater than 0"),
        ({"limits": {"gigabytes": 3}}, "Extra inputs"),
        ({"netwrk": False}, "Extra inputs"),
    ],
)
def test_invalid_policies_are_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SandboxPolicy.model_validate(fields)


def test_hosts_accept_names_ports_and_wildcards() -> None:
    policy = SandboxPolicy(
        allow_hosts=("pypi.org", "files.pythonhosted.org:443", "*.github.com", "10.0.0.1:8080")
    )
    assert len(policy.allow_hosts) == 4


def test_expand_resolves_home_and_workspace_relative_paths(tmp_path: Path) -> None:
    policy = SandboxPolicy(home=tmp_path / "home")
    workspace = tmp_path / "ws"
    assert policy.expand("~/.ssh", workspace) == tmp_path / "home" / ".ssh"
    assert policy.expand("data/raw", workspace) == workspace / "data" / "raw"
    assert policy.expand("/etc/shadow", workspace) == Path("/etc/shadow")
    assert policy.expand("../shared", workspace) == tmp_path / "shared"


def test_extra_hidden_paths_add_to_the_defaults() -> None:
    policy = SandboxPolicy(extra_hidden_paths=("~/.config/secret-tool",))
    assert policy.all_hidden_paths() == (*DEFAULT_HIDDEN_PATHS, "~/.config/secret-tool")


def test_from_toml_file(tmp_path: Path) -> None:
    file = tmp_path / "policy.toml"
    file.write_text(
        'allow_read = ["~/datasets"]\n'
        'allow_write = ["/var/tmp/cache"]\n'
        'allow_hosts = ["pypi.org"]\n'
        'extra_hidden_paths = ["secrets"]\n'
        "[limits]\nmemory_mb = 2048\ncpu_seconds = 600\n"
    )
    policy = SandboxPolicy.from_file(file)
    assert policy.allow_read == (Path("~/datasets"),)
    assert policy.allow_write == (Path("/var/tmp/cache"),)
    assert policy.allow_hosts == ("pypi.org",)
    assert policy.limits.memory_mb == 2048 and policy.limits.cpu_seconds == 600
    assert policy.limits.max_processes == ResourceLimits().max_processes


def test_from_json_file(tmp_path: Path) -> None:
    file = tmp_path / "policy.json"
    file.write_text(json.dumps({"network": True, "limits": {"open_files": 64}}))
    policy = SandboxPolicy.from_file(file)
    assert policy.network is True and policy.limits.open_files == 64


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.toml", None, "cannot read sandbox policy"),
        ("policy.yaml", "network: true", "unknown format"),
        ("broken.toml", "network = ", "not valid TOML"),
        ("broken.json", "{", "not valid JSON"),
        ("list.json", "[1, 2]", "top level must be a table"),
        ("bad.toml", "network = 'yes please'", "invalid sandbox policy"),
    ],
)
def test_bad_policy_files_raise_config_error(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    file = tmp_path / name
    if content is not None:
        file.write_text(content)
    with pytest.raises(ConfigError, match=message) as caught:
        SandboxPolicy.from_file(file)
    assert str(file) in str(caught.value)


def test_resolve_sandbox(tmp_path: Path) -> None:
    assert resolve_sandbox(None) is None
    assert resolve_sandbox(False) is None
    assert resolve_sandbox(True) == SandboxPolicy()
    custom = SandboxPolicy(network=True)
    assert resolve_sandbox(custom) is custom
    file = tmp_path / "p.json"
    file.write_text('{"allow_hosts": ["pypi.org"]}')
    assert resolve_sandbox(file) == SandboxPolicy(allow_hosts=("pypi.org",))
    assert resolve_sandbox(str(file)) == SandboxPolicy(allow_hosts=("pypi.org",))
    with pytest.raises(ConfigError, match="invalid sandbox setting"):
        resolve_sandbox(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("patterns", "host", "port", "allowed"),
    [
        (["pypi.org"], "pypi.org", 443, True),
        (["pypi.org"], "PyPI.org.", 80, True),
        (["pypi.org"], "pypi.org", 8080, False),
        (["pypi.org"], "evil-pypi.org", 443, False),
        (["*.github.com"], "api.github.com", 443, True),
        (["*.github.com"], "github.com", 443, False),
        (["pypi.org:8443"], "pypi.org", 8443, True),
        (["pypi.org:8443"], "pypi.org", 443, False),
        (["10.0.0.1:5000"], "10.0.0.1", 5000, True),
    ],
)
def test_host_patterns(patterns: list[str], host: str, port: int, allowed: bool) -> None:
    assert HostFilter(patterns).allows(host, port) is allowed
