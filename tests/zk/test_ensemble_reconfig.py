"""The client follows the ensemble: get_config, reconfig, and a host list changed by reconfig.

Topology: a 3-member ensemble with dynamic reconfiguration on
(``ZooKeeperEnsemble(reconfig=True)``: ``reconfigEnabled``, no standalone
mode, a super user), started for this module; a fourth member joins through
``add_member()`` and a reconfig.  Bad input and a server that refuses
reconfig run on the shared standalone server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest

import aiocoord
from aiocoord import ConfigError, ConnectionState, NoAuthError, ReconfigDisabledError
from aiocoord.cli import main
from aiocoord.server import free_ports
from aiocoord.settings import parse_hosts
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer
from aiocoord.zk import EnsembleServer
from tests.helpers import recording

pytestmark = [pytest.mark.anyio, pytest.mark.ensemble, pytest.mark.slow]

S = ConnectionState


@pytest.fixture(scope="module")
def anyio_backend() -> object:
    return "asyncio"  # one loop: the ensemble scenario takes many seconds


@pytest.fixture(scope="module")
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(3, reconfig=True) as started:
        yield started


def addresses(hosts: str) -> set[tuple[str, int]]:
    return set(parse_hosts(hosts)[0])


async def wait_hosts(coord: aiocoord.Coordinator, expected: set[tuple[str, int]]) -> None:
    """Until the coordinator's host list is `expected` (it changes with no event to await)."""
    with anyio.fail_after(20):
        while addresses(coord.hosts) != expected:  # noqa: ASYNC110 - no event for it
            await anyio.sleep(0.05)


async def test_get_config_lists_the_members_and_fires_on_a_reconfig(
    ensemble: ZooKeeperEnsemble, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with aiocoord.connect(
            ensemble.connect_string, namespace=zk_chroot, session_timeout=6
        ) as coord:
            config, watch = await coord.client.get_config(watch=True)
            assert watch is not None and not watch.fired
            assert [s.id for s in config.servers] == [m.myid for m in ensemble.members]
            assert {s.role for s in config.servers} == {"participant"}
            assert config.client_addresses == [m.address for m in ensemble.members]
            assert config.version > 0
            first = ensemble.members[0]
            assert config.server(first.myid) == EnsembleServer(
                first.myid,
                first.host,
                first.peer_port,
                first.election_port,
                "participant",
                first.host,
                first.port,
            )
            # Rewriting a member's own line is a reconfig that changes the version.
            await coord.client.add_auth("digest", ensemble.super_auth or "")
            again, _ = await coord.client.get_config()
            assert again == config
            changed = await coord.client.reconfig(joining=[first.spec], from_config=config.version)
            assert changed.version > config.version
            assert changed.servers == config.servers
            event = await watch.wait()
            assert event.type is aiocoord.zk.EventType.DATA_CHANGED
            assert event.path == "/zookeeper/config"
            with pytest.raises(aiocoord.BadVersionError):
                await coord.client.reconfig(joining=[first.spec], from_config=config.version)


async def test_reconfig_without_the_rights_is_refused(
    ensemble: ZooKeeperEnsemble, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(ensemble.connect_string, namespace=zk_chroot) as coord:
            with pytest.raises(NoAuthError):
                await coord.client.reconfig(leaving=[3])
            assert len((await coord.client.get_config())[0].servers) == len(ensemble.members)


async def test_the_client_follows_a_reconfig_and_keeps_its_session_and_rights(
    ensemble: ZooKeeperEnsemble, zk_chroot: str
) -> None:
    """A member added and the one the client is on removed: the client moves without being told.

    `holder` starts on member 1 (the list in order) with the full first list;
    `narrow` knows member 1 only.  A fourth member joins and member 1 leaves by
    reconfig; both end with the new member list, and once member 1 stops both
    reconnect to a member of it on their first session.  The latch and the
    mutex are held throughout (kept through SUSPENDED: the session lives), the
    rival waits throughout.
    """
    first = ensemble.members[0]
    with anyio.fail_after(120):
        async with (
            aiocoord.connect(
                ensemble.connect_string,
                namespace=zk_chroot,
                session_timeout=8,
                randomize_hosts=False,
            ) as holder,
            aiocoord.connect(
                first.connect_string, namespace=zk_chroot, session_timeout=8
            ) as narrow,
            aiocoord.connect(ensemble.connect_string, namespace=zk_chroot) as admin,
        ):
            assert holder.connected_address == first.address
            await admin.client.add_auth("digest", ensemble.super_auth or "")
            async with (
                aiocoord.leader_latch(
                    holder, "/app/leader", participant_id="holder", lose_on_suspend=False
                ) as latch,
                aiocoord.leader_latch(narrow, "/app/leader", participant_id="narrow") as other,
                recording(holder) as holder_events,
                recording(narrow) as narrow_events,
            ):
                await latch.wait()
                lock = aiocoord.mutex(holder, "/app/lock", lose_on_suspend=False)
                rival = aiocoord.mutex(narrow, "/app/lock", participant_id="rival")
                async with lock, anyio.create_task_group() as tg:
                    token = lock.token

                    async def rival_waits() -> None:
                        async with rival:
                            raise AssertionError("the rival got the lock while it was held")

                    tg.start_soon(rival_waits)
                    joined = await anyio.to_thread.run_sync(ensemble.add_member)
                    config = await admin.client.reconfig(
                        joining=[joined.spec], leaving=[first.myid]
                    )
                    new_members = {m.address for m in ensemble.members if m is not first}
                    assert set(config.client_addresses) == new_members
                    await wait_hosts(holder, new_members)
                    await wait_hosts(narrow, new_members)
                    sessions = holder.session_id, narrow.session_id
                    mark = holder_events.mark(), narrow_events.mark()
                    await anyio.to_thread.run_sync(ensemble.drop_member, first)
                    for events, after in zip((holder_events, narrow_events), mark, strict=True):
                        back = await events.wait_for(S.RECONNECTED, after=after, timeout=30)
                        assert not back.new_session
                    assert (holder.session_id, narrow.session_id) == sessions
                    assert holder.connected_address in new_members
                    assert narrow.connected_address in new_members
                    assert S.LOST not in holder_events.states + narrow_events.states
                    assert latch.has_leadership and not other.has_leadership
                    assert lock.token == token
                    queue = [p.id for p in await lock.participants()]
                    assert queue == [lock.participant_id, "rival"]
                    tg.cancel_scope.cancel()
            config, _ = await admin.client.get_config()
            assert first.myid not in {s.id for s in config.servers}
            assert joined.myid in {s.id for s in config.servers}


async def test_reconfig_on_a_server_without_it_says_so(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            config, watch = await coord.client.get_config()
            assert (config.version, config.servers, watch) == (0, (), None)
            with pytest.raises(ReconfigDisabledError, match="reconfigEnabled"):
                await coord.client.reconfig(leaving=[1])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "joining"),
        ({"joining": "server.x=h:1:2"}, "joining"),
        ({"joining": "server.4=h:1"}, "joining"),
        ({"joining": "server.4=h:1:2:boss"}, "joining"),
        ({"joining": []}, "joining"),
        ({"leaving": ["one"]}, "leaving"),
        ({"leaving": [True]}, "leaving"),
        ({"new_members": ["server.1=h:1:2"], "leaving": [2]}, "new_members"),
        ({"leaving": [1], "from_config": -2}, "from_config"),
    ],
)
async def test_bad_reconfig_arguments_name_the_argument(
    zk_server: ZooKeeperServer, zk_chroot: str, kwargs: dict[str, object], field: str
) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            with pytest.raises(ConfigError) as info:
                await coord.client.reconfig(**kwargs)  # type: ignore[arg-type]
            assert info.value.field == field


def test_cli_zk_ensemble_shows_members_and_roles(
    ensemble: ZooKeeperEnsemble, capsys: pytest.CaptureFixture[str]
) -> None:
    """``aiocoord zk ensemble``: the config's members with their srvr modes."""
    assert main(["zk", "ensemble", "--hosts", ensemble.connect_string, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    roles = dict(zip((m.myid for m in ensemble.members), ensemble.roles(), strict=True))
    assert [m["id"] for m in info["members"]] == sorted(roles)
    assert {m["id"]: m["mode"] for m in info["members"]} == roles
    assert list(roles.values()).count("leader") == 1
    assert {m["role"] for m in info["members"]} == {"participant"}
    assert main(["zk", "ensemble", "--hosts", ensemble.connect_string]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"ensemble config version {info['version']} (")
    assert lines[1].split() == ["id", "role", "mode", "client", "quorum"]
    leader = next(m for m in info["members"] if m["mode"] == "leader")
    assert any(
        line.split()[:4] == [str(leader["id"]), "participant", "leader", leader["client"]]
        for line in lines[2:]
    )


def test_cli_zk_ensemble_on_a_standalone_server(
    zk_server: ZooKeeperServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "ensemble", "--hosts", zk_server.connect_string, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {
        "version": None,
        "members": [
            {"id": None, "role": None, "client": zk_server.connect_string, "mode": "standalone"}
        ],
    }


def test_cli_zk_ensemble_unreachable_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    [port] = free_ports(1)
    assert main(["zk", "ensemble", "--hosts", f"127.0.0.1:{port}", "--timeout", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"aiocoord zk: cannot reach ZooKeeper at 127.0.0.1:{port} within 1s")
    # The command hid its connect-retry lines; the process's logging is as it was after it.
    assert logging.getLogger("aiocoord.session").filters == []
