"""`NetworkLab` itself: nodes reach each other, cuts and one-way blackholes hold, everything goes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aiocoord.testing import LabNode, NetworkLab, NetworkLabUnavailableError

pytestmark = pytest.mark.netfault

RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
s.bind((sys.argv[1], 9001))
with open(sys.argv[2], "ab", buffering=0) as out:
    out.write(b"ready\\n")
    while True:
        out.write(s.recv(100) + b"\\n")
"""
SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for text in sys.argv[2:]:
    s.sendto(text.encode(), (sys.argv[1], 9001))
"""


def send(node: LabNode, to: LabNode, *texts: str) -> None:
    argv = [*node.exec_prefix, sys.executable, "-c", SEND, to.address, *texts]
    subprocess.run(argv, check=True, timeout=10)


def received(path: Path, text: str, within: float = 1.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and text.encode() in path.read_bytes().split(b"\n"):
            return True
        time.sleep(0.05)
    return False


def test_cuts_blackholes_and_cleanup(lab: NetworkLab, tmp_path: Path) -> None:
    a, b, c = lab.node("a"), lab.node("b"), lab.node("c")
    inbox = tmp_path / "b.txt"
    lab.spawn(b, [sys.executable, "-c", RECEIVER, b.address, str(inbox)])
    assert received(inbox, "ready", within=10.0)
    send(a, b, "hello")
    assert received(inbox, "hello")

    lab.partition([a], [b, c])
    send(a, b, "cut")
    send(c, b, "same side")
    assert received(inbox, "same side")
    assert not received(inbox, "cut", within=0.5)
    lab.heal()
    send(a, b, "healed")
    assert received(inbox, "healed")

    lab.blackhole(b, a)  # only what b sends to a
    send(a, b, "one way")
    assert received(inbox, "one way")
    lab.blackhole(a, b)
    send(a, b, "both ways")
    assert not received(inbox, "both ways", within=0.5)
    assert lab.cut_pairs() == {(a.address, b.address), (b.address, a.address)}
    lab.heal()
    assert lab.cut_pairs() == set()

    lab.impair(a, loss=0.5)
    send(a, b, *(f"lossy {i}" for i in range(400)))
    lab.clear_impairments()
    send(a, b, "clear")
    assert received(inbox, "clear")  # in order on one link: every lossy datagram came before
    got = sum(1 for line in inbox.read_bytes().split(b"\n") if line.startswith(b"lossy "))
    assert 100 <= got <= 300, got


def test_bad_input_names_the_argument(lab: NetworkLab) -> None:
    lab.node("a")
    with pytest.raises(ValueError, match="name"):
        lab.node("a")
    with pytest.raises(ValueError, match="name"):
        lab.node("Not_Valid")
    with pytest.raises(ValueError, match="not a node"):
        lab.partition(["a"], ["nobody"])
    with pytest.raises(ValueError, match="groups"):
        lab.partition(["a"])
    with pytest.raises(ValueError, match="loss"):
        lab.impair("a", loss=5)
    with pytest.raises(ValueError, match="delay"):
        NetworkLab(delay="fast")  # type: ignore[arg-type]


ECHO = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9002))
s.listen()
with open(sys.argv[2], "ab", buffering=0) as out:
    out.write(b"ready\\n")
while True:
    c, _ = s.accept()
    while data := c.recv(100):
        c.sendall(data)
    c.close()
"""
PING = """
import json, socket, sys, time
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    peer = c.getpeername()[0]
    rtts = []
    for _ in range(int(sys.argv[3])):
        t = time.monotonic()
        c.sendall(b"x")
        if c.recv(1) != b"x":
            raise ConnectionResetError("closed")
        rtts.append(time.monotonic() - t)
    print(json.dumps({"peer": peer, "rtts": rtts}))
except OSError as exc:
    print(json.dumps({"error": type(exc).__name__}))
"""


def ping(node: LabNode, to: LabNode, count: int, port: int = 9002) -> dict[str, Any]:
    argv = [*node.exec_prefix, sys.executable, "-c", PING, to.address, str(port), str(count)]
    done = subprocess.run(argv, check=True, timeout=60, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_delay_relay(tmp_path: Path) -> None:
    """A node with a relay: its TCP connections are delayed by `impair`, in order, both ways."""
    with NetworkLab(delay="relay") as lab:
        a, b = lab.node("a", relay=True), lab.node("b")
        assert lab.delays_by_relay
        ready = tmp_path / "echo.txt"
        lab.spawn(b, [sys.executable, "-c", ECHO, b.address, str(ready)])
        assert received(ready, "ready", within=10.0)
        fast = ping(a, b, 5)
        assert fast["peer"] == b.address  # the relay is invisible
        assert max(fast["rtts"]) < 0.1, fast

        lab.impair(a, delay=0.1, jitter=0.05)
        slow = ping(a, b, 10)
        # Each way 0.1 +- 0.05 s: a round trip 0.1 to 0.3 s (and a loaded machine's slack).
        assert all(0.1 <= rtt <= 0.45 for rtt in slow["rtts"]), slow
        assert 0.15 <= sorted(slow["rtts"])[5] <= 0.3, slow
        with pytest.raises(NetworkLabUnavailableError, match="relay"):
            lab.impair(b, delay=0.1)
        with pytest.raises(NetworkLabUnavailableError, match="reordering"):
            lab.impair(a, reorder=0.1)
        lab.clear_impairments()
        assert max(ping(a, b, 5)["rtts"]) < 0.1

        assert ping(a, b, 1, port=9003) == {"error": "ConnectionResetError"}  # nobody there
        lab.partition([a], [b])  # cuts still cut: the relay's own connection is dropped
        assert "error" in ping(a, b, 1)
    assert not any(p.name.startswith(f"aiocoord-lab-{lab.tag}-") for p in Path("/tmp").iterdir())
