"""The fenced store: a tiny TCP service that refuses writes with a stale fencing token.

It stands for whatever a leader or lock holder would really write to (a
database row, a file on shared storage): a write to resource ``res`` is
accepted only if its token is >= the highest token accepted so far for
``res``, and every write, accepted or not, is logged (``w`` events, see
`records`).  The decision and the log line are made under one lock, so the
log's order is the store's order.  A paused participant that wakes up still
believing it leads is refused here as soon as a newer holder has written.

The same connection carries the participants' session reports: a participant
sends its session id and password whenever it gets a new session, so the
orchestrator can expire it on the server (`kill_session`) and knows it is up.

Protocol: one JSON object per line each way, on loopback.

- ``{"op": "write", "p", "res", "tok", "id"}`` -> ``{"ok": bool, "high": int}``
- ``{"op": "session", "p", "inc", "sid", "pw" (hex), "port"}`` -> ``{"ok": true}``
- ``{"op": "phase"}`` -> ``{"submit": bool}``: whether jobs may still be submitted
  (the orchestrator stops submissions when the calm phase begins, so that
  every job submitted has the calm phase to finish)

The server runs in threads of the orchestrator (`FencedStore`); the client
(`StoreClient`) is async, for the participants.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .records import Writer

__all__ = ("FencedStore", "SessionInfo", "StoreClient")

_MAX_LINE = 1 << 16


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """The latest session a participant reported."""

    participant: str
    incarnation: int
    session_id: int
    password: bytes
    port: int | None
    at: float


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        store = self.server.store
        try:
            for raw in self.rfile:
                try:
                    request = json.loads(raw)
                    reply = store._serve(request)
                except (ValueError, KeyError, TypeError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                self.wfile.write(json.dumps(reply).encode() + b"\n")
                self.wfile.flush()
        except OSError:
            return  # the participant died (SIGKILL): its connection was reset


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    store: FencedStore


class FencedStore:
    """The store's server side: ``with FencedStore(log_path) as store``, then `address`."""

    def __init__(self, log_path: str | Path) -> None:
        self._log = Writer(log_path)
        self._lock = threading.Lock()
        self._high: dict[str, int] = {}
        self._sessions: dict[str, SessionInfo] = {}
        self._changed = threading.Condition(self._lock)
        self.accepted = 0
        self.rejected = 0
        self.submitting = True
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.store = self
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fenced-store", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._log.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- what the orchestrator asks -------------------------------------------------------

    def session(self, participant: str) -> SessionInfo | None:
        with self._lock:
            return self._sessions.get(participant)

    def wait_session(
        self, participant: str, *, incarnation: int, timeout: float
    ) -> SessionInfo | None:
        """Block until `participant` (that incarnation or a later one) reported a session."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                info = self._sessions.get(participant)
                if info is not None and info.incarnation >= incarnation:
                    return info
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    # --- the protocol ---------------------------------------------------------------------

    def _serve(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "write":
            return self._write(str(request["p"]), str(request["res"]), int(request["tok"]), request)
        if op == "phase":
            return {"submit": self.submitting}
        if op == "session":
            info = SessionInfo(
                str(request["p"]),
                int(request["inc"]),
                int(request["sid"]),
                bytes.fromhex(str(request["pw"])),
                request.get("port"),
                time.monotonic(),
            )
            with self._changed:
                self._sessions[info.participant] = info
                self._changed.notify_all()
            return {"ok": True}
        raise ValueError(f"unknown op {op!r}")

    def _write(self, participant: str, res: str, token: int, request: dict[str, Any]) -> Any:
        with self._lock:
            high = self._high.get(res, -1)
            ok = token >= high
            if ok:
                self._high[res] = token
                self.accepted += 1
            else:
                self.rejected += 1
            self._log.emit(
                "w",
                n=self.accepted + self.rejected,
                p=participant,
                res=res,
                tok=token,
                id=request.get("id"),
                ok=ok,
                high=high,
            )
        return {"ok": ok, "high": max(high, token) if ok else high}


class StoreClient:
    """A participant's connection to the store; requests are serialized, reconnects lazily."""

    def __init__(self, host: str, port: int, participant: str) -> None:
        self._address = (host, port)
        self._participant = participant
        self._stream: anyio.abc.SocketStream | None = None
        self._reader: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()

    async def _request(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request and read its answer; None if the store could not be reached."""
        line = json.dumps(request).encode() + b"\n"
        async with self._lock:
            for _ in range(2):
                try:
                    if self._stream is None:
                        self._stream = await anyio.connect_tcp(*self._address)
                        self._reader = BufferedByteReceiveStream(self._stream)
                    assert self._reader is not None
                    await self._stream.send(line)
                    answer = await self._reader.receive_until(b"\n", _MAX_LINE)
                    reply: dict[str, Any] = json.loads(answer)
                    return reply
                except (OSError, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                    await self._drop()
                except BaseException:
                    await self._drop()  # cancelled mid-request: the stream is out of step
                    raise
            return None

    async def _drop(self) -> None:
        stream, self._stream, self._reader = self._stream, None, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def write(self, res: str, token: int, term_id: str) -> bool | None:
        """A fenced write: True accepted, False refused (stale token), None unreachable."""
        reply = await self._request(
            {"op": "write", "p": self._participant, "res": res, "tok": token, "id": term_id}
        )
        return None if reply is None else bool(reply.get("ok"))

    async def report_session(
        self, incarnation: int, session_id: int, password: bytes, port: int | None
    ) -> None:
        await self._request(
            {
                "op": "session",
                "p": self._participant,
                "inc": incarnation,
                "sid": session_id,
                "pw": password.hex(),
                "port": port,
            }
        )

    async def may_submit(self) -> bool:
        """Whether the orchestrator still wants jobs submitted (False if unreachable)."""
        reply = await self._request({"op": "phase"})
        return bool(reply and reply.get("submit"))

    async def aclose(self) -> None:
        await self._drop()
