"""MkDocs hook: show Sphinx-style roles in docstrings (``:class:`X```) as plain code.

ipybox's docstrings use roles such as ``:class:`ApprovalRequest``` and ``:meth:`stream```, which
mkdocstrings renders literally (``:class:<code>ApprovalRequest</code>``). This hook drops the role
prefix and a leading ``~`` (``~ipybox_core.errors.KernelDied`` becomes ``KernelDied``).
"""

from __future__ import annotations

import re
from typing import Any

_ROLES = r":(?:class|meth|func|attr|mod|data|exc|obj|const):"
_ROLE = re.compile(_ROLES + r"(<code>)~?(?:[\w.]+\.)?(?=[\w]+</code>)")
_TILDE = re.compile(_ROLES + r"(<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    """Rewrite the rendered HTML of every page (only docstrings contain roles)."""
    html = _ROLE.sub(r"\1", html)
    return _TILDE.sub(r"\1", html)
