"""The network-fault tier: marker ``netfault``, on demand (``-m netfault``), root only.

Tests marked ``netfault`` run when the marker is selected (``pytest -m
netfault tests/netfault``) or ``AIOCOORD_NETFAULT=1``; otherwise they are
skipped with how to run them, except the short scenario (a module that sets
``SHORT = True``), which the default suite runs too.  Every test here is skipped with the reason
when this machine cannot run a `NetworkLab` (`network_lab_unavailable`).
A test with no timeout of its own gets `TIMEOUT` (not the suite's 120 s: a
scenario starts an ensemble and several processes, and namespaces are slow
to delete on a loaded machine).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab, network_lab_unavailable

HERE = Path(__file__).parent
TIMEOUT = 300.0  # s
ON_DEMAND = (
    "the network-fault tier runs on demand: "
    "pytest -m netfault tests/netfault (as root; see docs/reliability.md)"
)


@pytest.hookimpl(tryfirst=True)  # before the suite's default timeout is added
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in item.path.parents]
    if not ours:
        return
    chosen = (
        "netfault" in (config.option.markexpr or "") or os.environ.get("AIOCOORD_NETFAULT") == "1"
    )
    runnable = []
    for item in ours:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT))
        short = getattr(getattr(item, "module", None), "SHORT", False)
        if item.get_closest_marker("netfault") is not None and not chosen and not short:
            item.add_marker(pytest.mark.skip(reason=ON_DEMAND))
        else:
            runnable.append(item)
    reason = network_lab_unavailable() if runnable else None
    if reason is not None:
        for item in runnable:
            item.add_marker(pytest.mark.skip(reason=f"no network lab here: {reason}"))


def _lab_namespaces(lab: NetworkLab) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    prefix = f"aiocoord-{lab.tag}-"
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    """A `NetworkLab`; afterwards none of its namespaces is left."""
    with NetworkLab() as made:
        yield made
    assert _lab_namespaces(made) == []
