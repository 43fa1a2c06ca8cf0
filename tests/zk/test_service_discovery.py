"""`service_discovery` against a real server: Curator's layout, lookups from a cache, lost sessions."""

from __future__ import annotations

import logging

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, ServiceInstance, service_discovery
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def test_register_find_update_unregister(
    coordinator: aiocoord.Coordinator,
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with anyio.fail_after(40):
        async with (
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other,
            service_discovery(coordinator, "/services") as mine,
            service_discovery(other, "/services") as theirs,
        ):
            api = ServiceInstance(
                name="api", id="i-1", address="10.0.0.5", port=8080, payload={"zone": "a"}
            )
            assert await mine.register(api) is api
            node = await other.client.get("/services/api/i-1")
            assert node.stat.ephemeral_owner == coordinator.session_id
            assert node.data.startswith(
                b'{"name":"api","id":"i-1","address":"10.0.0.5","port":8080'
            )

            async def listed(n: int) -> bool:
                return len(await theirs.instances("api")) == n

            await eventually(lambda: listed(1))
            assert await theirs.instances("api") == [api]
            assert await theirs.names() == ["api"]
            assert await theirs.instance("api", "i-1") == api

            # A node a Java service wrote (Curator's JSON) is listed; a corrupt one is skipped.
            await other.client.create(
                "/services/api/java-1",
                b'{"name":"api","id":"java-1","address":"10.0.0.6","port":9090,"sslPort":null,'
                b'"payload":null,"registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null,'
                b'"enabled":true}',
            )
            await other.client.create("/services/api/broken", b"not json")
            await eventually(lambda: listed(2))
            assert {i.id for i in await theirs.instances("api")} == {"i-1", "java-1"}

            async def skipped() -> bool:
                await theirs.instances("api")
                return "/services/api/broken" in caplog.text

            await eventually(skipped)
            logged = caplog.text.count("/services/api/broken")
            await theirs.instances("api")
            assert caplog.text.count("/services/api/broken") == logged  # once per state

            moved = ServiceInstance(name="api", id="i-1", address="10.0.0.7", port=8080)
            await mine.update(moved)
            await eventually(lambda: has(theirs, moved))

            # The registration comes back after a lost session.
            first = coordinator.session_id
            await expire_session(coordinator)
            await eventually(
                lambda: owned_by_new_session(other, "/services/api/i-1", coordinator, first),
                timeout=20,
            )
            assert (await theirs.instance("api", "i-1")) in (moved, None)
            await eventually(lambda: has(theirs, moved))

            await mine.unregister(moved)
            await eventually(lambda: listed(1))
            assert mine.registered() == []


async def is_stale(sd: aiocoord.ServiceDiscovery) -> bool:
    return sd.stale


async def has(sd: aiocoord.ServiceDiscovery, instance: ServiceInstance) -> bool:
    return await sd.instance(instance.name, instance.id) == instance


async def owned_by_new_session(
    other: aiocoord.Coordinator, path: str, coord: aiocoord.Coordinator, old: int | None
) -> bool:
    stat = await other.client.exists(path)
    return stat is not None and stat.ephemeral_owner == coord.session_id != old


async def test_providers_and_leaving(
    coordinator: aiocoord.Coordinator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "aiocoord.recipes.membership")
    with anyio.fail_after(20):
        async with service_discovery(coordinator, "/sd") as sd:
            changes = sd.changes()
            await sd.register(ServiceInstance(name="web", id="first"))
            await anext(changes)
            assert await sd.names() == ["web"]
            await sd.unregister(ServiceInstance(name="web", id="first"))
            for i in range(3):
                await sd.register(ServiceInstance(name="web", id=f"w{i}", port=8000 + i))
            await sd.register(ServiceInstance(name="web", id="off", enabled=False))
            await sd.register(ServiceInstance(name="db", id="d0", service_type="STATIC"))

            async def complete() -> bool:
                return len(await sd.instances("web")) == 4 and await sd.names() == ["db", "web"]

            await eventually(complete)
            provider = sd.provider("web")
            picked = [(await provider.get()) for _ in range(6)]
            assert {p.id for p in picked if p is not None} == {"w0", "w1", "w2"}
            assert await sd.provider("nothing").get() is None
            stat = await coordinator.client.exists("/sd/db/d0")
            assert stat is not None and stat.ephemeral_owner == 0  # STATIC: persistent
        # Leaving unregisters everything this discovery registered.
        assert await coordinator.client.children("/sd/web") == []
        assert await coordinator.client.exists("/sd/db/d0") is None


async def test_bad_arguments_name_themselves(coordinator: aiocoord.Coordinator) -> None:
    with pytest.raises(TypeError, match="coord"):
        service_discovery("zk", "/s")  # type: ignore[arg-type]
    with pytest.raises(aiocoord.InvalidPathError, match="base"):
        service_discovery(coordinator, "s")
    async with service_discovery(coordinator, "/s") as sd:
        with pytest.raises(ConfigError, match=r"instance\.name"):
            await sd.register(ServiceInstance(name="a/b"))
        with pytest.raises(ConfigError, match="service_type"):
            await sd.register(ServiceInstance(name="a", service_type="DYNAMIC_SEQUENTIAL"))
        with pytest.raises(TypeError, match="instance"):
            await sd.register("api")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="instance"):
            await sd.update(ServiceInstance(name="a"))


async def test_a_discovery_that_only_registers_reads_the_server(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(20):
        async with service_discovery(coordinator, "/plain", watch=False) as sd:
            assert await sd.names() == [] and await sd.instances("api") == []
            me = await sd.register(ServiceInstance(name="api", id="a", port=1))
            assert await sd.names() == ["api"]  # no cache: read at once
            assert await sd.instances("api") == [me]
            assert await sd.instance("api", "a") == me
            assert await sd.provider("api").get() == me
            assert not sd.stale
            with pytest.raises(ConfigError, match="watch"):
                sd.changes()
        assert await coordinator.client.exists("/plain/api/a") is None


async def test_suspended_serves_the_last_view_then_catches_up(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """While the connection is down the watcher answers from its cache (stale); a
    registration made meanwhile is listed once it is back, and ours is still there."""
    with FaultProxy(*zk_server.address) as proxy, anyio.fail_after(40):
        async with (
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other,
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=10
            ) as coord,
            service_discovery(coord, "/svc") as sd,
            service_discovery(other, "/svc", watch=False) as theirs,
        ):
            mine = await sd.register(ServiceInstance(name="api", id="mine"))
            changes = sd.changes()
            while await sd.instances("api") != [mine]:
                await anext(changes)
            proxy.reject_new(True)
            proxy.cut()
            await eventually(lambda: is_stale(sd))  # the cut is seen by the client
            late = await theirs.register(ServiceInstance(name="api", id="late"))
            assert await sd.instances("api") == [mine]  # the last view, while stale
            proxy.reject_new(False)
            while {i.id for i in await sd.instances("api")} != {"mine", "late"}:
                await anext(changes)
            assert not sd.stale and late in await sd.instances("api")
            stat = await other.client.exists("/svc/api/mine")
            assert stat is not None and stat.ephemeral_owner == coord.session_id


async def test_each_state_of_a_node_is_decoded_once(
    coordinator: aiocoord.Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher looking after each change decoded every instance at every look (n² in a churn)."""
    from aiocoord.recipes.membership import _discovery, _instance

    decoded: list[bytes] = []
    real = _instance.decode_instance

    def counting(data: bytes, path: str) -> ServiceInstance:
        decoded.append(data)
        return real(data, path)

    monkeypatch.setattr(_discovery, "decode_instance", counting)
    with anyio.fail_after(20):
        async with service_discovery(coordinator, "/svc-once") as sd:
            for i in range(3):
                await sd.register(ServiceInstance(name="api", id=f"i-{i}", port=i))

            async def listed() -> bool:
                return len(await sd.instances("api")) == 3

            await eventually(listed)
            before = len(decoded)
            for _ in range(5):
                assert len(await sd.instances("api")) == 3
            assert len(decoded) == before  # nothing changed: nothing decoded again
            await sd.update(ServiceInstance(name="api", id="i-0", port=99))

            async def updated() -> bool:
                return any(i.port == 99 for i in await sd.instances("api"))

            await eventually(updated)
            assert len(decoded) - before <= 2  # the changed node only (maybe read twice)


async def test_a_caller_changing_a_payload_changes_only_its_copy(
    coordinator: aiocoord.Coordinator,
) -> None:
    """Each state is decoded once and kept: a payload dict handed out must be the caller's own."""
    with anyio.fail_after(20):
        async with service_discovery(coordinator, "/svc-copy") as sd:
            await sd.register(ServiceInstance(name="api", id="a", port=1, payload={"zone": "a"}))

            async def listed() -> bool:
                return len(await sd.instances("api")) == 1

            await eventually(listed)
            (first,) = await sd.instances("api")
            assert isinstance(first.payload, dict)
            first.payload["zone"] = "changed by a caller"
            (again,) = await sd.instances("api")
            assert again.payload == {"zone": "a"}


async def test_the_log_of_corrupt_nodes_is_bounded(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Each corrupt node was remembered (so that it is logged once per state) for the
    discovery's whole life, one entry per corrupt path ever seen: now it is forgotten with
    the decoded instances, at most twice the cache plus 1,024."""
    rounds, per_round = 12, 120  # 1,440 corrupt nodes, never more than 120 at once
    with anyio.fail_after(120):
        # 120 requests at a time on the suite's shared server: a deadline of its own, not
        # the 4 s session timeout's, so that a loaded machine's slow round fails nothing.
        async with (
            aiocoord.connect(
                zk_server.connect_string,
                namespace=zk_chroot,
                session_timeout=10,
                request_timeout=60,
            ) as coordinator,
            service_discovery(coordinator, "/services", watch=False) as disc,
        ):
            client = coordinator.client
            await client.ensure_path("/services/api")
            for r in range(rounds):
                paths = [f"/services/api/broken-{r}-{n}" for n in range(per_round)]
                async with anyio.create_task_group() as tg:
                    for path in paths:
                        tg.start_soon(client.create, path, b"not json")
                assert await disc.instances("api") == []
                async with anyio.create_task_group() as tg:
                    for path in paths:
                        tg.start_soon(client.delete, path)
            remembered = len(disc._corrupt)
    assert remembered <= 1024 + per_round, remembered  # before: 1,440
