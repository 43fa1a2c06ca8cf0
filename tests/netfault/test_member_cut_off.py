"""The client's member is cut off from the other two: it loses quorum, the client moves on.

A follower that no longer hears its leader stops serving and drops its
clients.  The client must reach a majority member within its session
timeout (same session: RECONNECTED, not LOST); its term is kept through that
reconnect or ends by the default's deadline (2/3 of the session timeout after
the last answered request), and the latch has a holder throughout.

The short scenario of the tier (``SHORT``): the default suite runs it too,
wherever a `NetworkLab` can run (and skips it, with the reason, elsewhere);
about 15 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab

from .cutoff import cut_off_member

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]
SHORT = True  # also in the default suite (see conftest)


def test_member_cut_off_from_its_quorum(lab: NetworkLab, tmp_path: Path) -> None:
    cut_off_member(lab, tmp_path, "follower")
