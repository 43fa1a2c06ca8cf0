"""`NetworkLab` itself: nodes reach each other, cuts and one-way blackholes hold, everything goes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiocoord.testing import LabNode, NetworkLab

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
