"""The kernel in an OS sandbox: the workspace is writable, the rest of the machine is not there.

    python examples/sandbox.py

Linux needs bubblewrap >= 0.8 (``apt-get install bubblewrap``) and user namespaces; without them
the example says why and exits. It runs a few probes in a sandboxed kernel: work in the workspace,
then reading a secret outside it, reading a ``.env`` file inside it, writing to ``/etc`` and opening
a network connection, and finally an MCP call, which still works because it is made by the
application, not by the sandboxed kernel.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from ipybox_core import CodeExecutor, SandboxPolicy, SandboxUnavailable

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}

# --8<-- [start:probes]
PROBES = {
    "write and read in the workspace": "Path('notes.txt').write_text('hello'); Path('notes.txt').read_text()",
    "read a file outside the workspace": "Path(SECRET).read_text()",
    "read the workspace's .env file": "Path('.env').read_text()",
    "list your ~/.ssh": "os.listdir(HOST_SSH)",
    "write to /etc": "Path('/etc/ipybox-was-here').write_text('x')",
    "connect to the internet": "socket.create_connection(('pypi.org', 443), timeout=5)",
    "call an MCP tool (through the tool server)": "len(list_products().products)",
}
# --8<-- [end:probes]


async def main(root: Path) -> int:
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / ".env").write_text("API_KEY=do-not-leak\n")
    secret = root / "secret.txt"  # outside the workspace
    secret.write_text("the sandbox must not read this\n")

    # --8<-- [start:sandbox]
    policy = SandboxPolicy()  # the default; sandbox=True means the same
    try:
        async with CodeExecutor(workspace=workspace, sandbox=policy, approval="never") as executor:
            await executor.register_mcp_server("shop", SHOP)
            await executor.execute(
                f"import os, socket\nfrom pathlib import Path\n"
                f"from mcptools.shop import list_products\n"
                f"SECRET = {str(secret)!r}\nHOST_SSH = {str(Path.home() / '.ssh')!r}"
            )
            for label, code in PROBES.items():
                result = await executor.execute(code)
                outcome = result.text.strip() if result.error is None else result.error.args[0]
                print(f"{label:43} -> {outcome}")
    except SandboxUnavailable as error:  # says why, and how to fix it
        print(f"the sandbox cannot run on this machine:\n{error}")
    # --8<-- [end:sandbox]
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-sandbox-") as tmp:
        sys.exit(asyncio.run(main(Path(tmp))))
