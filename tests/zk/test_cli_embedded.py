"""One embedded ZooKeeper per user: found from any directory, `stop` fails when it stopped
nothing; and `inspect`'s words for a free lock and an unreachable server.

Every test points the per-user state directory at a temporary one (``AIOCOORD_ZK_DIR``)
or passes ``--dir``: the real user's state directory is never touched.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiocoord
import aiocoord.cli.zk as zk
from aiocoord.cli import main
from aiocoord.server import _embedded, free_ports


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private per-user state directory; a server left running there is stopped."""
    folder = tmp_path / "state"
    monkeypatch.setenv("AIOCOORD_ZK_DIR", str(folder))
    monkeypatch.delenv("AIOCOORD_HOSTS", raising=False)
    yield folder
    for record in tmp_path.rglob("server.json"):  # whatever a failing test left running
        zk.stop_server(record.parent)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_state_directory_is_per_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIOCOORD_ZK_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert zk.default_dir() == tmp_path / "xdg" / "aiocoord" / "zk"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert zk.default_dir() == tmp_path / "home" / ".local" / "state" / "aiocoord" / "zk"
    monkeypatch.setenv("AIOCOORD_ZK_DIR", str(tmp_path / "mine"))
    assert zk.default_dir() == tmp_path / "mine"


def test_one_server_found_from_any_directory(
    state: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Started in one folder; status, start and stop from others all see that one server."""
    [port] = free_ports(1)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    code, out, _ = _run(capsys, "zk", "start", "--port", str(port))
    assert code == 0 and f"ZooKeeper running at 127.0.0.1:{port}" in out, out
    assert (state / "server.json").is_file()
    assert not (tmp_path / "a" / ".aiocoord").exists()  # nothing in the working directory

    monkeypatch.chdir(tmp_path / "b")
    code, out, _ = _run(capsys, "zk", "status")
    assert code == 0 and f"ZooKeeper at 127.0.0.1:{port}" in out, out
    code, out, _ = _run(capsys, "zk", "start")
    assert code == 0 and "already running" in out and f"127.0.0.1:{port}" in out, out

    monkeypatch.chdir(tmp_path / "c")
    code, out, _ = _run(capsys, "zk", "stop")
    assert code == 0 and f"stopped ZooKeeper at 127.0.0.1:{port}" in out, out
    code, out, err = _run(capsys, "zk", "stop")
    assert code == 1 and out == "", out
    assert err.startswith("aiocoord zk: no embedded ZooKeeper running") and str(state) in err
    assert err.count("\n") == 1, err
    code, out, _ = _run(capsys, "zk", "status")
    assert code == 3 and "no embedded ZooKeeper running" in out


def test_stop_with_nothing_running_fails(
    state: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _run(capsys, "zk", "stop", "--dir", str(tmp_path / "empty"))
    assert code == 1 and "no embedded ZooKeeper running" in err, err


def test_a_running_server_is_found_by_its_port(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server started with another --dir (or by an older aiocoord in some project's
    .aiocoord/zk) is recognised by what it answers, so it is never started twice."""
    [port] = free_ports(1)
    elsewhere = tmp_path / "project" / ".aiocoord" / "zk"
    code, _, _ = _run(capsys, "zk", "start", "--dir", str(elsewhere), "--port", str(port))
    try:
        assert code == 0
        found = zk.find_by_port(port)
        assert found is not None and found.directory == elsewhere and found.port == port
        [nothing] = free_ports(1)
        assert zk.find_by_port(nothing) is None
    finally:
        zk.stop_server(elsewhere)


# --- inspect ---------------------------------------------------------------------------------------


def test_a_free_lock_names_its_last_holder() -> None:
    from aiocoord.cli.inspect import render

    lock = {
        "path": "/locks/report",
        "kind": "cas_lock",
        "held": False,
        "owner": "w4",
        "token": 0x1F,
        "lease_expires": None,
        "last_run": None,
        "last_failure": None,
    }
    assert render(lock)[0] == "/locks/report  [CAS lock] free, last held by w4, token 0x1f"
    never = lock | {"owner": None, "token": None}
    assert render(never)[0] == "/locks/report  [CAS lock] free, never held"
    held = lock | {"held": True, "lease_expires": "2030-01-01T00:00:00+00:00"}
    assert render(held)[0] == "/locks/report  [CAS lock] held, owner w4, token 0x1f"


def test_unreachable_hosts_suggest_zk_start_only_for_the_embedded_default(
    state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    [port] = free_ports(1)
    args = ["--loop", "asyncio", "inspect", "/", "--timeout", "0.5"]
    code, _, err = _run(capsys, *args, "--hosts", f"127.0.0.1:{port}")
    assert code == 1 and f"cannot reach ZooKeeper at 127.0.0.1:{port}" in err
    assert "aiocoord zk start" not in err, err
    # The same address as the embedded default's: then starting it is the advice.
    monkeypatch.setattr(_embedded, "DEFAULT_PORT", port)
    code, _, err = _run(capsys, *args, "--hosts", f"127.0.0.1:{port}")
    assert code == 1 and "aiocoord zk start" in err, err


def test_start_never_hides_behind_a_taken_default_port(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """connect() goes to the default port: `zk start` says what holds it rather than start
    a second server elsewhere (the default port is a free one here, standing in for 2181)."""
    [port] = free_ports(1)
    monkeypatch.setattr(_embedded, "DEFAULT_PORT", port)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        code, out, err = _run(capsys, "zk", "start")
    assert code == 1 and out == "" and not (state / "server.json").exists()
    assert f"127.0.0.1:{port}" in err and "another program" in err and "--port" in err, err
    # Held by an embedded server of another folder: the message names that folder.
    elsewhere = tmp_path / "elsewhere"
    code, _, _ = _run(capsys, "zk", "start", "--dir", str(elsewhere), "--port", str(port))
    assert code == 0
    code, out, err = _run(capsys, "zk", "start", "--dir", str(tmp_path / "third"))
    assert code == 1 and f"the embedded ZooKeeper of {elsewhere}" in err, err


def test_connect_finds_the_server_zk_start_recorded_on_another_port(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`zk start --port P` once said "export AIOCOORD_HOSTS=..." although connect() could
    find the server it recorded, as the command does: connect() with no hosts now does."""
    [port] = free_ports(1)
    monkeypatch.chdir(tmp_path)  # no .env here
    code, out, _ = _run(capsys, "zk", "start", "--port", str(port))
    assert code == 0 and "export" not in out and "aiocoord.connect()" in out, out

    async def connected_port(**overrides: Any) -> int:
        with anyio.fail_after(30):
            async with aiocoord.connect(**overrides) as coord:
                address = coord.connected_address
                assert address is not None
                return address[1]

    try:
        assert anyio.run(connected_port) == port
        assert anyio.run(lambda: connected_port(session_timeout=5.0)) == port
        # Hosts given (here the recorded server's own, so that it connects) are taken as given.
        given = aiocoord.connect(f"127.0.0.1:{port}")
        assert given.settings.hosts == f"127.0.0.1:{port}"
    finally:
        zk.stop_server(state)
    # Nothing recorded: the default, as before.
    assert aiocoord.connect().settings.hosts == "127.0.0.1:2181"
