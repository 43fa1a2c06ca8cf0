"""A listing made of many requests at once fails with the error itself, not an exception group.

The claim timer of a worker caught `ConnectionLostError` around its listing
of the workers' queues, but the requests ran in a task group, which wraps
errors in an `ExceptionGroup`: the error escaped, and the worker closed
itself (seen in the soak).  Real server; the failure is put in one listing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import aiocoord
from aiocoord import ConnectionLostError
from aiocoord.scheduler._claimer import Claimer
from aiocoord.scheduler._lookup import bucketed
from aiocoord.scheduler._records import JobsLayout

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def failing_on(client: aiocoord.ZkClient, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    real: Callable[..., object] = client.children

    async def children(path: str, *args: object, **kwargs: object) -> object:
        if path.endswith(suffix):
            raise ConnectionLostError(f"no answer for {path}")
        return await real(path, *args, **kwargs)  # type: ignore[misc]

    monkeypatch.setattr(client, "children", children)


async def test_bucketed_raises_a_lost_connection_alone(
    coordinator: aiocoord.Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = coordinator.client
    for bucket in ("0.00", "0.01", "0.02"):
        await client.create(f"/b/{bucket}/job", make_parents=True)
    failing_on(client, monkeypatch, "/0.01")
    with pytest.raises(ConnectionLostError):
        await bucketed(client, "/b")


async def test_the_claimers_queue_listing_raises_a_lost_connection_alone(
    coordinator: aiocoord.Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = coordinator.client
    for worker in ("w1", "w2"):
        await client.create(f"/q/assignments/{worker}/job", make_parents=True)
    failing_on(client, monkeypatch, "/w2")
    claimer = Claimer.__new__(Claimer)  # only the listing is under test
    claimer._client = client
    claimer._layout = JobsLayout("/q")
    with pytest.raises(ConnectionLostError):
        await claimer._held()
