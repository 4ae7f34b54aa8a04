"""The Claude Code plugin in ``plugin/``: manifest, MCP server entry and skill are well-formed, and
the command the MCP entry names starts a working ipybox MCP server."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import TextContent

PLUGIN = Path(__file__).parents[2] / "plugin"
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
# Fields of .claude-plugin/plugin.json (Claude Code plugin manifest reference).
MANIFEST_FIELDS = {
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "outputStyles",
    "lspServers",
    "userConfig",
}


def manifest() -> dict[str, Any]:
    data = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert isinstance(data, dict)
    return data


def mcp_servers() -> dict[str, dict[str, Any]]:
    data = json.loads((PLUGIN / ".mcp.json").read_text())
    assert isinstance(data, dict)
    return data


def frontmatter(path: Path) -> dict[str, str]:
    text = path.read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, f"{path} has no YAML frontmatter"
    fields = {}
    for line in match.group(1).splitlines():
        key, separator, value = line.partition(":")
        assert separator and key.strip() and value.strip(), f"{path}: unexpected frontmatter line {line!r}"
        fields[key.strip()] = value.strip()
    return fields


def test_manifest() -> None:
    data = manifest()
    assert set(data) <= MANIFEST_FIELDS, set(data) - MANIFEST_FIELDS
    assert KEBAB.match(data["name"]) and data["name"] == "ipybox"
    assert SEMVER.match(data["version"])
    assert isinstance(data["description"], str) and 20 < len(data["description"]) < 400
    assert isinstance(data["author"], dict) and data["author"]["name"]
    assert all(isinstance(keyword, str) for keyword in data["keywords"])
    # Components stay in their default places: nothing inside .claude-plugin/ but the manifest.
    assert [p.name for p in (PLUGIN / ".claude-plugin").iterdir()] == ["plugin.json"]


def test_the_mcp_entry_runs_ipybox_mcp_with_uvx() -> None:
    servers = mcp_servers()
    assert list(servers) == ["ipybox"]
    entry = servers["ipybox"]
    assert set(entry) <= {"command", "args", "env", "cwd"}
    assert entry["command"] == "uvx"
    # ``uvx --from <this checkout>``: the index's ``ipybox`` is another, older project.
    assert entry["args"][:4] == ["--from", "${CLAUDE_PLUGIN_ROOT}/..", "ipybox", "mcp"]
    checkout = (PLUGIN / entry["args"][1].removeprefix("${CLAUDE_PLUGIN_ROOT}/")).resolve()
    assert 'name = "ipybox"' in (checkout / "pyproject.toml").read_text()
    assert all(isinstance(arg, str) for arg in entry["args"])


def test_skills() -> None:
    skills = sorted((PLUGIN / "skills").iterdir())
    assert skills, "no skills"
    for folder in skills:
        fields = frontmatter(folder / "SKILL.md")
        assert fields["name"] == folder.name and KEBAB.match(fields["name"]) and len(fields["name"]) <= 64
        assert 50 < len(fields["description"]) <= 1024
    body = (PLUGIN / "skills" / "code-actions" / "SKILL.md").read_text()
    for tool in ("execute_code", "api_reference", "register_mcp_server", "PermissionError"):
        assert tool in body


async def test_the_named_command_starts_the_server(tmp_path: Path) -> None:
    """``uvx --from CHECKOUT ipybox ARGS`` runs the checkout's ``ipybox`` console script: run the installed one."""
    entry = mcp_servers()["ipybox"]
    script = Path(sys.executable).parent / "ipybox"
    assert script.is_file(), "the ipybox console script is not installed"
    params = StdioServerParameters(
        command=str(script), args=entry["args"][entry["args"].index("ipybox") + 1 :], cwd=tmp_path
    )
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        assert client.session.server_info is not None and client.session.server_info.name == "ipybox"
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"execute_code", "api_reference", "register_mcp_server"} <= tools
        result = await client.call_tool("execute_code", {"code": "import os\nprint(os.getcwd())\n6 * 7"})
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert texts == [f"{tmp_path}\n42"]
