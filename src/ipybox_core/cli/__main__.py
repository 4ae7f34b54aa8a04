"""``python -m ipybox_core.cli``."""

from ipybox_core.cli import main

raise SystemExit(main())
