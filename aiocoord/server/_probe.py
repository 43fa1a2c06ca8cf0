"""Raw-socket ZooKeeper: handshake and four-letter probes, and really expiring a session.

Every call here is blocking socket work with a deadline. ``kill_session``'s technique (zookeeper-notes 6.1, Curator's old ``KillSession``): open a second
TCP connection and send a ConnectRequest carrying the victim's session id and
password. The server moves the session onto the new connection, closing the
victim's socket, and a closeSession (opcode -11) on the new connection then ends
the session for good: its ephemerals are deleted and its watchers notified, and
the victim learns "expired" at its next contact. Nothing is faked client-side.
A victim that reconnects at once can take its session back in between; the
closeSession is therefore pipelined behind the ConnectRequest, and the exchange
repeated until a ConnectRequest for the session is answered "expired".

Frames are big-endian and length-prefixed. The same helpers make the probes
that tell a freshly started server really answers clients, and whose it is.
"""

from __future__ import annotations

import itertools
import logging
import re
import socket
import struct
import time
from pathlib import Path

__all__ = ("data_dir_of", "four_letter_word", "kill_session", "probe_handshake", "server_mode")

logger = logging.getLogger(__name__)

_CLOSE_SESSION = -11
_MAX_FRAME = 1 << 20
# Inside the bounds every harness server sets (minSessionTimeout=500,
# maxSessionTimeout=30000); the server would clamp anything else anyway.
_REQUEST_TIMEOUT_MS = 10_000
_CLOSE_REQUEST = struct.pack("!ii", 1, _CLOSE_SESSION)  # xid 1, no body


class _Conn:
    """A blocking socket with an overall deadline, speaking ZooKeeper frames."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self._deadline = time.monotonic() + timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def _arm(self) -> None:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("ZooKeeper did not answer in time")
        self.sock.settimeout(remaining)

    def send(self, *bodies: bytes) -> None:
        """Send each body as one frame, all in a single write."""
        self._arm()
        self.sock.sendall(b"".join(struct.pack("!i", len(b)) + b for b in bodies))

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            self._arm()
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionResetError("ZooKeeper closed the connection")
            buf += chunk
        return bytes(buf)

    def read_frame(self) -> bytes:
        (length,) = struct.unpack("!i", self._read_exact(4))
        if not 0 <= length <= _MAX_FRAME:
            raise ConnectionError(f"bad ZooKeeper frame length {length}")
        return self._read_exact(length)


def _connect_request(session_id: int, password: bytes, timeout_ms: int) -> bytes:
    """ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly."""
    body = struct.pack("!iqiq", 0, 0, timeout_ms, session_id)
    return body + struct.pack("!i", len(password)) + password + b"\x00"


def _handshake(conn: _Conn, session_id: int, password: bytes) -> int:
    """Send a ConnectRequest and return the session id answered (0: expired)."""
    conn.send(_connect_request(session_id, password, _REQUEST_TIMEOUT_MS))
    return _read_connect_response(conn)


def _read_connect_response(conn: _Conn) -> int:
    _proto, _timeout, sid = struct.unpack_from("!iiq", conn.read_frame())
    return int(sid)


def _close_session(conn: _Conn) -> int:
    """Send closeSession and return the reply's error code."""
    conn.send(_CLOSE_REQUEST)
    return _read_close_reply(conn)


def _read_close_reply(conn: _Conn) -> int:
    _xid, _zxid, err = struct.unpack_from("!iqi", conn.read_frame())
    return int(err)


def probe_handshake(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether the server answers a real handshake: create a session, then close it.

    ZooKeeper 3.8.0 opens its client port before its database is loaded and never
    answers a client that connects in that window, so ``srvr`` alone is not proof.
    """
    try:
        conn = _Conn(host, port, timeout)
    except OSError:
        return False
    try:
        sid = _handshake(conn, 0, bytes(16))
        if sid == 0:
            return False
        _close_session(conn)
        return True
    except (OSError, struct.error):
        return False
    finally:
        conn.close()


def _take_and_close(host: str, port: int, session_id: int, password: bytes, timeout: float) -> str:
    """One attempt: "expired" (no such session), "closed", or "raced" (try again).

    The closeSession goes out in the same write as the ConnectRequest, as the
    Java client pipelines its first requests: the server reads it right after
    moving the session to this connection. Waiting for the ConnectResponse first
    gives a victim that reconnects at once the time to take its session back,
    and the server then closes this connection instead of the session.
    """
    conn = _Conn(host, port, timeout)
    try:
        conn.send(_connect_request(session_id, password, _REQUEST_TIMEOUT_MS), _CLOSE_REQUEST)
        try:
            if _read_connect_response(conn) == 0:
                return "expired"
            err = _read_close_reply(conn)
        except ConnectionError:
            return "raced"  # the victim took its session back and this connection was closed
        if err:
            logger.debug("closeSession for 0x%x answered error %d", session_id, err)
            return "raced"
        return "closed"
    finally:
        conn.close()


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 2.0) -> str:
    """Send a four-letter command (``srvr``, ``mntr``, ``ruok``...) and return the answer.

    Raises ``OSError`` (``TimeoutError`` included) when the server does not answer.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(host: str, port: int, timeout: float = 1.0) -> str | None:
    """The ``Mode:`` of ``srvr`` (standalone, leader, follower...), or None if not serving."""
    try:
        answer = four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return None
    match = re.search(r"^Mode: (\S+)", answer, re.MULTILINE)
    return match.group(1) if match else None


def data_dir_of(host: str, port: int, timeout: float = 1.0) -> Path | None:
    """The data folder the server at ``host:port`` names in ``conf``, or None if it does not.

    This tells whose server answers on a port: the folder it was configured with.
    """
    try:
        answer = four_letter_word(host, port, "conf", timeout)
    except OSError:
        return None
    match = re.search(r"^dataDir=(.+)$", answer, re.MULTILINE)
    if match is None:
        return None
    data = Path(match.group(1).strip())  # the server adds its version: <folder>/version-2
    return data.parent if data.name.startswith("version-") else data


def kill_session(
    host: str, port: int, session_id: int, password: bytes, timeout: float = 10.0
) -> bool:
    """Expire the session ``session_id`` on the server at ``host:port``; blocking.

    Works with any client: for kazoo pass ``*client.client_id``. Returns True when
    the session was live and is now closed, False when it had already expired.
    Raises ``TimeoutError`` or ``OSError`` when the server does not answer in
    ``timeout`` seconds.
    """
    if not session_id:
        raise ValueError("session_id must be a live session's id, not 0/None")
    deadline = time.monotonic() + timeout
    for attempt in itertools.count(1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"could not close session 0x{session_id:x} in {timeout}s")
        outcome = _take_and_close(host, port, session_id, bytes(password), remaining)
        if outcome == "expired":
            if attempt == 1:
                logger.debug("session 0x%x had already expired", session_id)
                return False
            logger.info("expired session 0x%x on %s:%d", session_id, host, port)
            return True
        # After "closed", one more round confirms that the server no longer knows the
        # session, and its ConnectRequest makes the server close any connection that
        # the victim re-attached meanwhile (which would otherwise hang on, unanswered).
        logger.debug("closing session 0x%x: %s (attempt %d)", session_id, outcome, attempt)
    raise AssertionError("unreachable")
