"""Reading ``/zookeeper/config`` and the host list's replacement rules: pure, no server."""

from __future__ import annotations

import re
import socket

import pytest

from aiocoord.zk import EnsembleConfig, EnsembleServer
from aiocoord.zk._config import followed_hosts, parse_config
from aiocoord.zk._hosts import HostList, format_hosts
from aiocoord.zk._retry_log import member_fault

CONFIG = b"""server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181
server.3=[fe80::3]:2888:3888:observer;[fe80::3]:2182
server.2=zk2:2888:3888;2181
server.4=zk4:2888:3888:participant
group.1=1:2:3
version=10000000a"""


def test_a_config_is_read_into_members_by_id() -> None:
    config = parse_config(CONFIG)
    assert config.version == 0x10000000A
    assert [s.id for s in config.servers] == [1, 2, 3, 4]
    one, two, three, four = config.servers
    assert one == EnsembleServer(1, "10.0.0.1", 2888, 3888, "participant", "0.0.0.0", 2181)
    assert one.client_address == ("10.0.0.1", 2181)  # a wildcard means the quorum host
    assert two.client_address == ("zk2", 2181) and two.role == "participant"
    assert three.client_address == ("fe80::3", 2182) and three.role == "observer"
    assert four.client_address is None  # no client part: not a place to connect to
    assert config.client_addresses == [("10.0.0.1", 2181), ("zk2", 2181), ("fe80::3", 2182)]
    assert three.spec == "server.3=[fe80::3]:2888:3888:observer;[fe80::3]:2182"
    assert two.spec == "server.2=zk2:2888:3888:participant;2181"
    assert config.server(4) is four and config.server(9) is None


def test_an_empty_config_is_a_standalone_servers() -> None:
    assert parse_config(b"") == EnsembleConfig(0, ())


@pytest.mark.parametrize(
    "line",
    [
        b"server.x=h:1:2",
        b"server.1=h:1",
        b"server.1=h:1:2:boss",
        b"server.1=[::1:1:2",
        b"server.1=h:1:2;h:port",
        b"version=zz",
        b"\xff",
    ],
)
def test_a_bad_line_is_named(line: bytes) -> None:
    named = "UTF-8" if line == b"\xff" else line.decode()
    with pytest.raises(ValueError, match=re.escape(named)):
        parse_config(line)


def test_a_new_list_replaces_the_old_unless_it_is_the_same_set() -> None:
    hosts = HostList([("a", 1), ("b", 2)], shuffle=False)
    assert [hosts.next(), hosts.next(), hosts.next()] == [("a", 1), ("b", 2), ("a", 1)]
    assert not hosts.replace([("b", 2), ("a", 1)])
    assert hosts.replace([("c", 3), ("c", 3), ("d", 4)])
    assert hosts.given == (("c", 3), ("d", 4)) and len(hosts) == 2
    assert hosts.next() == ("c", 3)  # from the start of the new list
    assert format_hosts([*hosts.given, ("::1", 5)]) == "c:3,d:4,[::1]:5"
    with pytest.raises(ValueError, match="at least one host"):
        hosts.replace([])


def test_only_a_refusal_or_a_name_without_address_is_the_members_fault() -> None:
    def failed(cause: BaseException) -> BaseException:
        exc = ConnectionError("cannot connect")
        exc.__cause__ = cause
        return exc

    assert member_fault(failed(ConnectionRefusedError(111, "refused"))) == "refuses connections"
    assert member_fault(failed(socket.gaierror(-2, "unknown"))) == "does not resolve"
    assert member_fault(failed(TimeoutError())) is None
    assert member_fault(failed(ConnectionResetError())) is None


def test_the_first_config_is_followed_only_where_it_shares_a_member() -> None:
    config = parse_config(CONFIG)
    members = config.client_addresses
    assert followed_hosts(config, [("zk2", 2181)], None) == members
    # Reached by other names (a published port): kept until a reconfig changes the config.
    assert followed_hosts(config, [("localhost", 2181)], None) is None
    assert followed_hosts(config, [("localhost", 2181)], config.version) is None
    assert followed_hosts(config, [("localhost", 2181)], config.version - 1) == members
    assert followed_hosts(parse_config(b"server.1=h:1:2"), members, None) is None
    assert followed_hosts(EnsembleConfig(0), members, 5) is None
