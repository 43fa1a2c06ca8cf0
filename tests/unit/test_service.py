"""`Service`: the one ``async with`` of a component (its enter and exit are `start` and `aclose`)."""

from __future__ import annotations

import pytest

from aiocoord._lifecycle import Service
from aiocoord.metrics import Watcher
from aiocoord.recipes.cron import Cron
from aiocoord.scheduler import JobWorker


class Recorder(Service):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    async def aclose(self) -> None:
        self.calls.append("aclose")

    def _hurry(self) -> None:
        self.calls.append("hurry")


@pytest.mark.anyio
async def test_the_block_is_start_and_aclose() -> None:
    service = Recorder()
    async with service as entered:
        assert entered is service
        assert service.calls == ["start"]
    assert service.calls == ["start", "aclose"]


@pytest.mark.anyio
async def test_leaving_by_an_exception_hurries_first() -> None:
    service = Recorder()
    with pytest.raises(KeyError):
        async with service:
            raise KeyError("x")
    assert service.calls == ["start", "hurry", "aclose"]


@pytest.mark.parametrize("component", [Cron, JobWorker, Watcher])
def test_components_use_the_one_enter_and_exit(component: type) -> None:
    """No copy of the enter/exit: the component inherits `Service`'s."""
    assert issubclass(component, Service)
    assert component.__aenter__ is Service.__aenter__
    assert component.__aexit__ is Service.__aexit__
