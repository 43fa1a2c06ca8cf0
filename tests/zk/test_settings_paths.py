"""Settings validation and path rules: bad input fails at the call, naming what is wrong."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import aiocoord
from aiocoord import ConfigError, InvalidPathError, Settings
from aiocoord.settings import parse_hosts
from aiocoord.zk.paths import add_chroot, strip_chroot, validate_path


def test_defaults_and_overrides() -> None:
    s = Settings.build("10.0.0.1:2181,10.0.0.2", session_timeout=3)
    assert s.addresses == [("10.0.0.1", 2181), ("10.0.0.2", 2181)]
    assert s.session_timeout == 3.0
    again = Settings.build(s, namespace="/app")
    assert again.chroot == "/app" and again.hosts == s.hosts


def test_chroot_in_host_string() -> None:
    assert parse_hosts("h:1,[::1]:2/app/x") == ([("h", 1), ("::1", 2)], "/app/x")
    assert Settings.build("h:1/app").chroot == "/app"


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOCOORD_HOSTS", "zk1:2181")
    monkeypatch.setenv("AIOCOORD_SESSION_TIMEOUT", "4.5")
    s = Settings()
    assert s.addresses == [("zk1", 2181)] and s.session_timeout == 4.5


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"session_timeout": -1}, "session_timeout"),
        ({"session_timeout": "soon"}, "session_timeout"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"request_timeout": -2}, "request_timeout"),
        ({"namespace": "app"}, "namespace"),
        ({"namespace": "/a//b"}, "namespace"),
        ({"auth": "nopassword"}, "auth"),
        ({"session_lost_fraction": 1.5}, "session_lost_fraction"),
        ({"session_lost_fraction": 0}, "session_lost_fraction"),
        ({"hosts": ""}, "hosts"),
        ({"hosts": "h:port"}, "hosts"),
        ({"hosts": "h:99999"}, "hosts"),
        ({"hosts": "a,,b"}, "hosts"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_settings_name_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(**overrides)  # type: ignore[arg-type]
    assert info.value.field == field
    assert field in str(info.value)


def test_invalid_settings_via_connect() -> None:
    with pytest.raises(ConfigError, match="session_timeout"):
        aiocoord.connect("127.0.0.1:2181", session_timeout=0)
    with pytest.raises(ConfigError, match="hosts"):
        aiocoord.connect(42)  # type: ignore[arg-type]


def test_chroot_given_twice() -> None:
    with pytest.raises(ConfigError):
        Settings.build("h:1/a", namespace="/b")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "empty"),
        ("a/b", "start with"),
        ("/a/", "end with"),
        ("/a//b", "empty segment"),
        ("/a/./b", "relative"),
        ("/a/../b", "relative"),
        ("/a\x00b", "invalid character"),
        ("/zookeeper/config", "reserved"),
        ("/zookeeper", "reserved"),
        (b"/a", "must be a str"),
        (None, "must be a str"),
    ],
)
def test_bad_paths(path: object, why: str) -> None:
    with pytest.raises(InvalidPathError, match=why) as info:
        validate_path(path)
    assert info.value.path == path
    assert isinstance(info.value, ValueError)


def test_good_paths() -> None:
    for p in ["/", "/a", "/a/b-c_d.e", "/zookeeperish", "/ünï"]:
        assert validate_path(p) == p
    assert validate_path("/zookeeper/config", allow_reserved=True)
    assert validate_path("/q/", sequential=True)


def test_chroot_mapping() -> None:
    assert add_chroot("/app", "/") == "/app"
    assert add_chroot("/app", "/x") == "/app/x"
    assert strip_chroot("/app", "/app/x") == "/x"
    assert strip_chroot("/app", "/app") == "/"
    assert strip_chroot(None, "/x") == "/x"


def test_every_path_argument_raises_invalid_path_error() -> None:
    """Latches, locks, the scheduler and task leadership refuse a bad path the same way."""
    c = aiocoord.Coordinator(Settings.build("127.0.0.1:2181"))  # never entered: nothing is sent
    w = aiocoord.Worker("1.0")
    calls: list[tuple[str, Callable[[str], object]]] = [
        ("leader_latch", lambda p: aiocoord.leader_latch(c, p)),
        ("LeaderLatch", lambda p: aiocoord.LeaderLatch(c, p)),
        ("cas_lock", lambda p: aiocoord.cas_lock(c, p)),
        ("CasLock", lambda p: aiocoord.CasLock(c, p)),
        ("once_per", lambda p: aiocoord.once_per(c, p, 60)),
        ("Scheduler", lambda p: aiocoord.Scheduler(c, p)),
        ("task_leadership", lambda p: aiocoord.task_leadership(c, p, worker=w, tasks=["a"])),
        ("TaskLeadership", lambda p: aiocoord.TaskLeadership(c, p, worker=w, tasks=["a"])),
    ]
    for name, call in calls:
        refuses_root = name in ("Scheduler", "LeaderLatch", "leader_latch")
        for bad in ("relative/path", "/a//b", *(["/"] if refuses_root else [])):
            with pytest.raises(InvalidPathError) as info:
                call(bad)
            assert type(info.value) is InvalidPathError, name
            assert info.value.path == bad, name
