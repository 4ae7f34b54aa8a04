"""Exit codes of the ``ipybox`` command and how errors become messages (no tracebacks for user
mistakes)."""

from __future__ import annotations

import os
import traceback

from ipybox_core.cli._console import Console

EXIT_OK = 0
EXIT_CODE_ERROR = 1
"""The executed code raised an exception."""
EXIT_USAGE = 2
"""Bad command line or configuration: unknown option, missing file, invalid config, unset ``${VAR}``."""
EXIT_FAILURE = 3
"""ipybox could not do its job: an MCP server unreachable, the kernel or sandbox failed, a timeout."""
EXIT_INTERNAL = 70
"""A bug in ipybox (the traceback is shown with ``IPYBOX_DEBUG=1``)."""
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A mistake on the command line that argparse cannot see (e.g. a missing file)."""


def report(error: BaseException, console: Console) -> int:
    """Print ``error`` for a human and return the exit code it maps to."""
    from ipybox_core.errors import ConfigError, IpyboxError

    if isinstance(error, KeyboardInterrupt):
        console.error("interrupted")
        return EXIT_INTERRUPTED
    if isinstance(error, (UsageError, ConfigError)):
        console.error(str(error))
        return EXIT_USAGE
    if isinstance(error, IpyboxError):
        console.error(str(error) or type(error).__name__)
        return EXIT_FAILURE
    if isinstance(error, OSError) and error.filename is not None:
        console.error(f"{error.filename}: {error.strerror or error}")
        return EXIT_USAGE
    if isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:
        return report(error.exceptions[0], console)
    console.error(f"internal error: {type(error).__name__}: {error}")
    if os.environ.get("IPYBOX_DEBUG"):
        traceback.print_exception(error, file=console.stream)
    else:
        console.info("(set IPYBOX_DEBUG=1 to see the traceback; please report it)")
    return EXIT_INTERNAL
