"""``python -m aiocoord``: the same as the `aiocoord` command."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
