"""What a `FakeZooKeeper` script sees (`FakeRequest`) and answers (`Answer`, bytes or None)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ("Answer", "FakeRequest", "Script")


@dataclass(frozen=True, slots=True)
class FakeRequest:
    """One packet a client sent to a `FakeZooKeeper`, and the reply the server would send.

    `xid` and `opcode` are None for the handshake's ConnectRequest, whose
    `reply` is the ConnectResponse.  `reply` is the packet without its length
    prefix: ``FakeZooKeeper.frame(request.reply)`` is what goes on the wire.
    The request has already been applied when the script sees it (a write
    whose reply is lost was still made, as on a real server).
    """

    connection: int
    """Serial number of the client connection (1 for the first accepted)."""
    session_id: int
    xid: int | None
    opcode: int | None
    body: bytes
    """The request after its xid and opcode (the whole ConnectRequest for a handshake)."""
    reply: bytes


@dataclass(frozen=True, slots=True)
class Answer:
    """What a script sends instead of the reply: `data` as is (b"": nothing), then maybe a hang-up."""

    data: bytes = b""
    hang_up: bool = False


Script = Callable[[FakeRequest], "Answer | bytes | None"]
"""Called in the server's thread for each packet: None sends the reply, bytes are sent instead."""
