"""What a client remembers of the CAS locks it used: the pace of the latest paths, not all."""

from __future__ import annotations

from aiocoord.recipes.cas_lock import _turns
from aiocoord.recipes.cas_lock._turns import PACED_PATHS, pace_of


class Client:
    """Stands in for a `ZkClient`: `pace_of` keys on it weakly."""


def test_a_client_remembers_the_pace_of_its_latest_lock_paths_only() -> None:
    """One `Pace` per path a client ever locked, for the client's whole life: a process
    locking one path per job kept them all."""
    client = Client()
    once = pace_of(client, "/locks/once")
    often = pace_of(client, "/locks/often")
    for n in range(3 * PACED_PATHS):
        pace_of(client, f"/locks/job-{n}")
        if n % 100 == 0:
            assert pace_of(client, "/locks/often") is often  # used lately: kept, as measured
    assert len(_turns._paces[client]) == PACED_PATHS
    assert pace_of(client, "/locks/often") is often
    assert pace_of(client, "/locks/once") is not once  # not used for long: starts afresh
