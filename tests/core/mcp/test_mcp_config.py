"""Server configs: the three transports, ${VAR} placeholders and mcpServers files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipybox_core.errors import ConfigError
from ipybox_core.mcp import (
    HttpServerConfig,
    McpServerConfig,
    SseServerConfig,
    StdioServerConfig,
    load_mcp_config,
    parse_server_config,
)


def test_stdio_config_from_claude_desktop_dict() -> None:
    config = parse_server_config(
        "fs", {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"A": "1"}, "cwd": "/srv"}
    )
    assert isinstance(config, StdioServerConfig)
    assert (config.transport, config.command, config.args, config.env, config.cwd) == (
        "stdio",
        "npx",
        ["-y", "server-fs", "/tmp"],
        {"A": "1"},
        "/srv",
    )
    assert config.protocol == "fallback"
    assert config.connect_timeout is None and config.call_timeout is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"url": "https://example.com/mcp"}, HttpServerConfig),
        ({"url": "https://example.com/sse"}, SseServerConfig),
        ({"url": "https://example.com/v1/sse/"}, SseServerConfig),
        ({"url": "https://example.com/events", "transport": "sse"}, SseServerConfig),
        ({"url": "https://example.com/sse", "transport": "http"}, HttpServerConfig),
        ({"url": "https://example.com/mcp", "type": "http"}, HttpServerConfig),
        ({"url": "https://example.com/mcp", "type": "streamable-http"}, HttpServerConfig),
        ({"url": "https://example.com/mcp", "type": "streamableHttp"}, HttpServerConfig),
        ({"url": "https://example.com/x", "type": "sse"}, SseServerConfig),
        ({"command": "srv", "type": "stdio"}, StdioServerConfig),
    ],
)
def test_transport_from_keys_type_and_url(raw: dict[str, str], expected: type[McpServerConfig]) -> None:
    assert type(parse_server_config("s", raw)) is expected


def test_http_config_headers_and_timeouts() -> None:
    config = parse_server_config(
        "gh",
        {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer t"}, "call_timeout": 5},
    )
    assert isinstance(config, HttpServerConfig)
    assert config.headers == {"Authorization": "Bearer t"}
    assert config.call_timeout == 5.0


def test_placeholders_are_filled_in_every_field() -> None:
    environ = {"BIN": "/opt/bin/srv", "TOKEN": "s3cret", "HOME_DIR": "/home/u", "HOST": "example.com"}
    stdio = parse_server_config(
        "s",
        {
            "command": "${BIN}",
            "args": ["--token=${TOKEN}", "--level", "${LEVEL:-info}"],
            "env": {"API_KEY": "${TOKEN}", "PLAIN": "no placeholder $HOME ${not valid}"},
            "cwd": "${HOME_DIR}/work",
        },
        environ=environ,
    )
    assert isinstance(stdio, StdioServerConfig)
    assert stdio.command == "/opt/bin/srv"
    assert stdio.args == ["--token=s3cret", "--level", "info"]
    assert stdio.env == {"API_KEY": "s3cret", "PLAIN": "no placeholder $HOME ${not valid}"}
    assert stdio.cwd == "/home/u/work"
    http = parse_server_config(
        "h",
        {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        environ=environ,
    )
    assert isinstance(http, HttpServerConfig)
    assert http.url == "https://example.com/mcp"
    assert http.headers == {"Authorization": "Bearer s3cret"}


def test_default_applies_to_unset_and_empty_variables_only() -> None:
    config = parse_server_config(
        "s",
        {"command": "x", "args": ["${EMPTY:-d1}", "${SET:-d2}", "${UNSET:-}"]},
        environ={"EMPTY": "", "SET": "v"},
    )
    assert isinstance(config, StdioServerConfig)
    assert config.args == ["d1", "v", ""]


def test_placeholders_default_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYBOX_TEST_CONFIG_VAR", "from-os")
    config = parse_server_config("s", {"command": "x", "env": {"V": "${IPYBOX_TEST_CONFIG_VAR}"}})
    assert isinstance(config, StdioServerConfig)
    assert config.env == {"V": "from-os"}


def test_missing_variable_names_server_variable_and_field() -> None:
    with pytest.raises(ConfigError) as error:
        parse_server_config(
            "github", {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${GH_TOKEN}"}}, environ={}
        )
    message = str(error.value)
    assert "'github'" in message and "GH_TOKEN" in message and "env.GITHUB_TOKEN" in message


def test_all_missing_variables_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as error:
        parse_server_config(
            "api", {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}, environ={}
        )
    message = str(error.value)
    assert (
        "HOST" in message and "TOKEN" in message and "headers.Authorization" in message and "url" in message
    )


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"command": "x", "url": "https://example.com/mcp"}, "both 'command'"),
        ({}, "needs 'command'"),
        ({"args": ["a"]}, "needs 'command'"),
        ({"url": "https://example.com/mcp", "type": "websocket"}, "unknown transport 'websocket'"),
        ({"url": "ftp://example.com/mcp"}, "url"),
        ({"command": ""}, "command"),
        ({"command": "x", "argz": ["typo"]}, "argz"),
        ({"command": "x", "args": "not-a-list"}, "args"),
        ({"url": "https://example.com/mcp", "transport": "sse", "type": "http"}, "disagree"),
        ({"command": "x", "call_timeout": -1}, "call_timeout"),
    ],
)
def test_invalid_configs_raise_config_error_naming_the_problem(raw: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_server_config("bad", raw)
    assert fragment in str(error.value)
    assert "'bad'" in str(error.value)


def test_foreign_client_keys_are_ignored() -> None:
    config = parse_server_config(
        "s", {"command": "x", "disabled": False, "autoApprove": ["a"], "alwaysAllow": [], "description": "d"}
    )
    assert isinstance(config, StdioServerConfig)


def test_models_are_accepted_and_their_placeholders_filled() -> None:
    model = StdioServerConfig(command="srv", env={"TOKEN": "${TOKEN}"}, call_timeout=3)
    config = parse_server_config("s", model, environ={"TOKEN": "t"})
    assert isinstance(config, StdioServerConfig)
    assert config.env == {"TOKEN": "t"}
    assert config.call_timeout == 3
    sse = parse_server_config(None, SseServerConfig(url="https://example.com/events"))
    assert isinstance(sse, SseServerConfig)


def test_not_a_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="expected a dict"):
        parse_server_config("s", ["command"])  # type: ignore[arg-type]


def test_describe_shows_placeholders_not_their_values() -> None:
    environ = {"TOKEN": "s3cret-value", "HOST": "example.com"}
    stdio = parse_server_config("s", {"command": "srv", "args": ["--token=${TOKEN}"]}, environ=environ)
    assert stdio.describe() == "srv --token=${TOKEN}"
    http = parse_server_config("h", {"url": "https://${HOST}/mcp?key=${TOKEN}"}, environ=environ)
    assert http.describe() == "https://${HOST}/mcp"
    assert StdioServerConfig(command="python", args=["server.py"]).describe() == "python server.py"


def test_repr_hides_secrets() -> None:
    stdio = parse_server_config("s", {"command": "x", "env": {"TOKEN": "s3cret-value"}})
    http = parse_server_config(
        "h", {"url": "https://u:pw@example.com/mcp?key=k", "headers": {"A": "s3cret-h"}}
    )
    assert "s3cret-value" not in repr(stdio)
    assert "s3cret-h" not in repr(http)
    assert "pw" not in http.describe() and "key=k" not in http.describe()


def test_load_mcp_config_file(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "server-fs", "${ROOT}"]},
                    "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"X": "${X:-1}"}},
                    "legacy": {"url": "https://example.com/sse"},
                    "off": {"command": "never", "disabled": True},
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    configs = load_mcp_config(path, environ={"ROOT": "/data"})
    assert list(configs) == ["fs", "remote", "legacy"]
    fs, remote, legacy = configs.values()
    assert isinstance(fs, StdioServerConfig) and fs.args == ["-y", "server-fs", "/data"]
    assert isinstance(remote, HttpServerConfig) and remote.headers == {"X": "1"}
    assert isinstance(legacy, SseServerConfig)


def test_load_vscode_servers_key(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"s": {"type": "stdio", "command": "x"}}}))
    assert isinstance(load_mcp_config(path)["s"], StdioServerConfig)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"mcpServers": {"a": {"command": "x",}}}', "not valid JSON"),
        ('{"servers_typo": {}}', "mcpServers"),
        ("[1, 2]", "mcpServers"),
        ('{"mcpServers": {"a": "python server.py"}}', "'a'"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE_NOT_SET_1}"}}}}', "NOPE_NOT_SET_1"),
    ],
)
def test_bad_config_files(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as error:
        load_mcp_config(path, environ={})
    assert fragment in str(error.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "nope.json")
