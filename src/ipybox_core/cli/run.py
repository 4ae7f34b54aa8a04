"""``ipybox run FILE.py|-``: execute a file in a kernel, approving its MCP calls in the terminal."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ipybox_core.cli._console import CodeOutput, Console
from ipybox_core.cli._errors import EXIT_CODE_ERROR, EXIT_OK, UsageError
from ipybox_core.cli._options import add_executor_options, check_paths, positive_float, sandbox_setting
from ipybox_core.cli._prompt import TerminalApprover
from ipybox_core.terminal import terminal_safe

if TYPE_CHECKING:
    from ipybox_core.errors import CodeError
    from ipybox_core.executor import CodeExecutor
    from ipybox_core.mcp.oauth import Authorize

DESCRIPTION = """\
Execute a Python file (or code from stdin with "-") in a fresh IPython kernel. MCP servers from
--config are importable as `from mcptools.<server> import <tool>`; each MCP call the code makes
is shown and waits for your approval (y/N) unless --yes is given. Approval answers are read from
the terminal; with a file they may also be piped to stdin. Control characters in the code's output
(ANSI escapes, carriage returns, bidi overrides) are shown escaped, e.g. \\x1b."""

EPILOG = """\
exit codes: 0 success, 1 the code raised, 2 usage or configuration error,
            3 ipybox failure (MCP server unreachable, timeout, kernel died), 130 interrupted

examples:
  ipybox run script.py --config mcp.json
  echo 'print(1 + 1)' | ipybox run -

OAuth: a server with "auth": "oauth" in --config that needs your authorization prints its URL (and
opens it in the browser where there is one); ipybox receives the redirect on the config's loopback
redirect_uri (default http://127.0.0.1:33418/callback) and keeps the tokens in
~/.local/state/ipybox/oauth (or $IPYBOX_STATE_DIR/oauth) for the next run.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run",
        help="execute a Python file, approving its MCP calls in the terminal",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE.py|-", help='the code to run ("-": read it from stdin)')
    add_executor_options(parser, workspace_help="the kernel's working directory (default: .)")
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="interrupt the code after this long (time waiting for approval does not count; default: none)",
    )
    parser.add_argument(
        "--images", type=Path, metavar="DIR", help="save the images the code displays as PNG files in DIR"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    check_paths(args)
    code = _read_code(args.file)
    output = CodeOutput()
    approver = TerminalApprover(
        auto_approve=args.yes, answers_from_stdin=args.file != "-", console=console, output=output
    )
    return asyncio.run(_run(code, args, approver, output, console))


def _read_code(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.is_file():
        raise UsageError(f"{file}: no such file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file}: not UTF-8 text ({exc.reason})") from None


async def _run(
    code: str, args: argparse.Namespace, approver: TerminalApprover, output: CodeOutput, console: Console
) -> int:
    from ipybox_core.executor import CodeExecutor
    from ipybox_core.mcp.config import load_mcp_config
    from ipybox_core.mcp_server.environment import load_environment

    env = load_environment(args.env_file or args.workspace / ".env")
    configs = load_mcp_config(args.config, environ=env.mcp_env) if args.config is not None else {}
    sandbox = sandbox_setting(args)
    console.progress("starting the kernel" + (" in the sandbox" if sandbox else ""))
    async with CodeExecutor(
        workspace=args.workspace,
        sandbox=sandbox,
        mcp_env=env.mcp_env,
        kernel_env=env.kernel_env,
        timeout=args.timeout,
        mcp_authorize=_authorization_prompt(console),
    ) as executor:
        for name, config in configs.items():
            console.progress(
                f"connecting to MCP server {name!r} ({config.describe()}) and generating its API"
            )
            await executor.register_mcp_server(name, config)
        return await _execute(executor, code, args, approver, output)


async def _execute(
    executor: CodeExecutor,
    code: str,
    args: argparse.Namespace,
    approver: TerminalApprover,
    output: CodeOutput,
) -> int:
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import DisplayOutput, ExecutionResult, OutputChunk

    images = 0
    async with executor.stream(code) as execution:
        async for event in execution:
            if isinstance(event, OutputChunk):
                output.write(event.text, stream=event.stream)
            elif isinstance(event, ApprovalRequest):
                output.flush()
                await approver.decide(event, executor.servers)
            elif isinstance(event, DisplayOutput):
                if event.png is not None:
                    images += 1
                    output.line(_image_note(event.png, images, args.images))
                elif event.text:
                    output.line(event.text)
            elif isinstance(event, ExecutionResult) and event.error is not None:
                output.flush()
                missing = _unregistered_server(event.error, set(executor.servers))
                if missing is not None:
                    raise UsageError(missing)
                output.line(event.error.traceback or str(event.error), stream="stderr")
                return EXIT_CODE_ERROR
    return EXIT_OK


_NO_MODULE = re.compile(r"No module named '(mcptools(?:\.(\w+))?)[.']")


def _unregistered_server(error: CodeError, registered: set[str]) -> str | None:
    """The one line for code that imports the API of a server ``--config`` did not register."""
    match = _NO_MODULE.match(error.evalue) if error.ename == "ModuleNotFoundError" else None
    if match is None or match.group(2) in registered:
        return None
    module, name = match.group(1), match.group(2)
    if not registered or name is None:
        return (
            f"the code imports {module}, but no MCP server is registered: pass --config FILE "
            '(an {"mcpServers": {...}} file) with the servers the code uses'
        )
    known = ", ".join(sorted(registered))
    return f"the code imports {module}, but --config registers no MCP server {name!r} (registered: {known})"


def _authorization_prompt(console: Console) -> Authorize:
    """Show an MCP server's authorization URL (even with --quiet), open it, catch the redirect on loopback."""
    import os

    from ipybox_core.mcp.oauth_loopback import browser_authorize

    def show(line: str) -> None:
        print(console.style("ipybox: ", "bold") + terminal_safe(line), file=console.stream, flush=True)

    graphical = sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    return browser_authorize(show=show, open_browser=graphical)  # no text-mode browser in this terminal


def _image_note(png: bytes, number: int, folder: Path | None) -> str:
    if folder is None:
        return f"[image {number}: PNG, {len(png):,} bytes; use --images DIR to save it]"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"image-{number}.png"
    path.write_bytes(png)
    return f"[image {number}: {path}]"
