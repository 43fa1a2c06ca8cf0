"""The ensemble's leader isolated from its followers while a client stays connected to it.

The followers elect a new leader among themselves; the old leader, without
a quorum, stops serving and drops its clients.  The client on it must reach
the new majority within its session timeout (same session), its term must
end on SUSPENDED, and the latch must have a holder on the majority side.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab

from .cutoff import cut_off_member

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]


def test_leader_isolated_from_its_followers(lab: NetworkLab, tmp_path: Path) -> None:
    cut_off_member(lab, tmp_path, "leader")
