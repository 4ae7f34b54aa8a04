"""API generation: MCP servers from a config file become typed Python packages in the kernel.

    python examples/codegen.py

Loads examples/mcp_config.json (an ``mcpServers`` file with ``${VAR}`` placeholders), registers its
servers, shows what was generated and the reference an agent's prompt gets, and uses the API from
kernel code: ``help()``, models, a tool error, argument validation, and a secret that reaches the
MCP server but not the kernel.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from ipybox_core import CodeExecutor, ConfigError, load_mcp_config

EXAMPLES = Path(__file__).parent
CONFIG = EXAMPLES / "mcp_config.json"

# --8<-- [start:kernel]
KERNEL_CODE = """
from ipybox_core.errors import ToolError
from mcptools.ledger import file_report
from mcptools.shop import exchange_rate, list_products

help(exchange_rate)                                   # the tool's full description
products = list_products(category="games").products   # a pydantic model (the tool has an outputSchema)
print(type(products[0]).__name__, products[0].name, products[0].price_usd)

try:
    exchange_rate(currency="XYZ")                     # the MCP server reports an error
except ToolError as error:
    print("ToolError:", error)

try:
    list_products(category="food")                    # checked against the schema before any call
except ValueError as error:
    print("invalid argument:", str(error).splitlines()[0])

import os
print("LEDGER_TOKEN in the kernel:", os.environ.get("LEDGER_TOKEN"))
print("report signed by the server:", file_report(title="t", lines=[{"label": "a", "value": 1}]).signed)
"""
# --8<-- [end:kernel]


async def main(workspace: Path) -> None:
    # --8<-- [start:config]
    environ = {**os.environ, "PYTHON": sys.executable, "EXAMPLES_DIR": str(EXAMPLES)}
    environ.pop("LEDGER_TOKEN", None)
    try:
        load_mcp_config(CONFIG, environ=environ)
    except ConfigError as error:  # names the server, the variable and the field
        print(error)

    environ["LEDGER_TOKEN"] = "s3cr3t"  # e.g. from your secret store; the kernel never sees it
    servers = load_mcp_config(CONFIG, environ=environ)  # "archived" is disabled: left out
    print({name: config.describe() for name, config in servers.items()})
    # --8<-- [end:config]

    # --8<-- [start:register]
    async with CodeExecutor(workspace=workspace, mcp_servers=CONFIG, mcp_env=environ, approval="never") as ex:
        for name, server in ex.servers.items():
            functions = [tool.function for tool in server.package.tools]
            print(f"{name}: from {server.module} import {', '.join(functions)}")
        print(sorted(path.name for path in (workspace / "mcptools" / "shop").iterdir()))
        # --8<-- [end:register]

        # --8<-- [start:reference]
        print(ex.api_reference(["ledger"]))  # signatures and models, for the agent's prompt
        print(ex.api_reference(max_chars=900))  # shortened step by step to fit a budget
        # --8<-- [end:reference]

        result = await ex.execute(KERNEL_CODE)
        print(result.to_text())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-codegen-") as tmp:
        asyncio.run(main(Path(tmp)))
