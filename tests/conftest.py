"""Fixtures come from aiocoord's own pytest plugin (``aiocoord.testing.pytest_plugin``).

``tests/unit/`` holds the pure tables (state machines, choices, codecs, version
order, the chaos checker's rules): no server, seconds in all; each is marked
``unit``, so ``./scripts/check -m unit`` (or ``pytest -m unit``) runs just them.
``tests/zk/`` holds the tests against real ZooKeeper servers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# pytester runs an inner pytest session to check the plugin's report hook.
pytest_plugins = ("pytester",)

_UNIT = Path(__file__).parent / "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _UNIT in item.path.parents:
            item.add_marker(pytest.mark.unit)
