"""Fixtures come from aiocoord's own pytest plugin (``aiocoord.testing.pytest_plugin``).

``tests/unit/`` holds the pure tables (state machines, choices, codecs, version
order, the chaos checker's rules): no server, seconds in all; each is marked
``unit``, so ``./scripts/check -m unit`` (or ``pytest -m unit``) runs just them.
``tests/zk/`` holds the tests against real ZooKeeper servers.  Tests marked
``slow_tier`` (minutes each: the 200,000-job backlog) run only when ``-m``
names them: ``./scripts/check -m slow_tier``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# pytester runs an inner pytest session to check the plugin's report hook.
pytest_plugins = ("pytester",)

_UNIT = Path(__file__).parent / "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _UNIT in item.path.parents:
            item.add_marker(pytest.mark.unit)
    # The slow tier runs only when asked for by name (``-m slow_tier``).
    if "slow_tier" not in (config.getoption("markexpr", "") or ""):
        kept = [item for item in items if item.get_closest_marker("slow_tier") is None]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept
