"""``python -m ipybox_core.cli``.

``python -m`` puts the working directory first on ``sys.path``; for ``ipybox mcp --workspace .`` that
directory is the sandbox's writable workspace, so every later (lazy) import of the host server
could load a module planted there. It is dropped before anything else is imported.
"""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from ipybox_core.cli import main

raise SystemExit(main())
