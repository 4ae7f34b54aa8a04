"""``ipybox_core.runtime``: the documented name of :mod:`ipybox_core.inkernel.runtime`.

The kernel-side client lives in the kernel-side package :mod:`ipybox_core.inkernel`; this module
makes ``import ipybox_core.runtime`` (generated code, user code, tests) give that very module
object, so that setting an attribute here (e.g. ``LOST_HOST_AFTER``) sets it there. Standard
library only, like the rest of the kernel side.
"""

from __future__ import annotations

import sys

from ipybox_core.inkernel import runtime as _runtime
from ipybox_core.inkernel.runtime import *  # noqa: F403  (the names, for readers and type checkers)

sys.modules[__name__] = _runtime
