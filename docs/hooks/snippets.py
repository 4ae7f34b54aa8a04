"""MkDocs hook: the site shows the example code that scripts/render_docs.py rendered into the pages.

The pages hold each snippet as a plain fenced block between ``<!-- snippet: ... -->`` and
``<!-- /snippet -->`` (so they read correctly as files). This hook drops the two markers before
the page is rendered (inside an admonition they would wrap the code in a paragraph) and warns
(which fails ``mkdocs build --strict``) about a snippet that is stale or not rendered.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "render_docs.py"
_spec = importlib.util.spec_from_file_location("render_docs", _SCRIPT)
assert _spec is not None
assert _spec.loader is not None
render_docs = sys.modules.setdefault("render_docs", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(render_docs)

log = logging.getLogger("mkdocs.hooks.snippets")


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    where = page.file.src_uri
    try:
        _, problems, _ = render_docs.render(markdown)
    except render_docs.SnippetError as error:
        log.warning("%s: %s", where, error)
        problems = []
    for problem in problems:
        log.warning("%s:%d: %s: run `python scripts/render_docs.py`", where, problem.line, problem.message)
    return str(render_docs.without_markers(markdown))
