"""``ipybox`` with the sessions layout of before issue 22 put back (the control of the default-session
attacks): the default session of HTTP clients works in ``--workspace`` itself, the sessions' root is
``<workspace>/.ipybox-sessions`` (inside that workspace), and workspace names show their keys.

Run as ``python old_sessions_layout.py mcp ...`` (the arguments of ``ipybox``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ipybox_core.cli import main
from ipybox_core.mcp_server import service
from ipybox_core.sessions import _workspaces


def _root_inside_the_workspace(self: service.IpyboxService) -> Path:
    root = self.settings.workspace / service.SESSIONS_DIR
    root.mkdir(parents=True, exist_ok=True)
    return root


_keyed_session = service.IpyboxService.session


async def _default_in_the_workspace(self: service.IpyboxService, key: str | None) -> Any:
    if key in (None, service.DEFAULT_SESSION):
        self._pooled = False  # the default session's kernel works in --workspace
        return await _keyed_session(self, None)
    return await _keyed_session(self, key)


service.IpyboxService._open_sessions_root = _root_inside_the_workspace  # type: ignore[method-assign]
service.IpyboxService.session = _default_in_the_workspace  # type: ignore[method-assign]
_workspaces.WorkspaceRoot.name_of = lambda self, key: _workspaces.legacy_name(key)  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
