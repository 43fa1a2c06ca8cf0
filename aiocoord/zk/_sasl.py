"""The SASL login a connection makes right after its handshake, before any other request.

ZooKeeper tunnels SASL through ordinary requests (opcode 102, ``sasl``): the
client sends a ``GetSASLRequest`` carrying its token, the server answers a
``SetSASLResponse`` carrying its challenge, until the mechanism is complete
(``ZooKeeperSaslClient`` in the Java client, ``_authenticate_with_sasl`` in
kazoo).  The mechanism itself (DIGEST-MD5, GSSAPI) is pure-sasl's, the
library kazoo uses, not crypto of ours; its GSSAPI runs on the ``kerberos``
package (the ``sasl`` extra).  DIGEST-MD5 names the server ``zk-sasl-md5``
whatever its host, as ZooKeeper does; GSSAPI asks for the ticket of
``<service>/<host connected to>``.  A server that refuses the login
answers with AUTHFAILED (or "SASL required") and closes the connection:
that is `AuthFailedError`, naming the mechanism, the user and the server,
never the password.  The exchange is bounded by the connection's read
timeout (its reader is running) and by a number of rounds.

A server that requires SASL (``sessionRequireClientSASLAuth=true``) accepts
the handshake of a client without it and refuses its first request:
`probe_required` asks once with a ping, so that such a client learns it at
`connect()`, not at its first request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..errors import AuthFailedError
from . import _replies, _wire
from ._connection import Connection, wait_reply

if TYPE_CHECKING:
    from pydantic import SecretStr

    from ..settings import Settings

__all__ = ("DIGEST_HOST", "LocalSaslError", "SaslLogin", "authenticate", "probe_required")

DIGEST_HOST = "zk-sasl-md5"
"""The server name ZooKeeper's DIGEST-MD5 uses whatever its host (``SecurityUtils``)."""

_MAX_ROUNDS = 16  # DIGEST-MD5 takes 3, GSSAPI 4: more is a server that never completes
_AUTH_FAILED = -115
_SASL_REQUIRED = -124  # SESSIONCLOSEDREQUIRESASLAUTH


class LocalSaslError(AuthFailedError):
    """The login failed on the client's side (a Kerberos error such as a KDC out of reach,
    an expired ticket, no key in the keytab), not by the server's refusal."""


@dataclass(frozen=True, slots=True)
class SaslLogin:
    """Who to log in as, and how; the password is a `SecretStr` and never shown."""

    mechanism: str
    username: str | None
    password: SecretStr | None = field(repr=False)
    service: str = "zookeeper"

    @classmethod
    def from_settings(cls, settings: Settings) -> SaslLogin | None:
        if settings.sasl_mechanism is None:
            return None
        return cls(
            settings.sasl_mechanism,
            settings.sasl_username,
            settings.sasl_password,
            settings.sasl_service,
        )

    @property
    def who(self) -> str:
        return f" as {self.username!r}" if self.username else ""


def _mechanism(login: SaslLogin, host: str, what: str) -> Any:
    """pure-sasl's client for `login` (imported here: only a SASL login needs it)."""
    import puresasl.client

    props: dict[str, Any] = {}
    if login.mechanism == "DIGEST-MD5":
        host = DIGEST_HOST
        props["username"] = login.username
        props["password"] = None if login.password is None else login.password.get_secret_value()
    elif login.username:
        props["principal"] = login.username
    try:
        return puresasl.client.SASLClient(
            host, service=login.service, mechanism=login.mechanism, **props
        )
    except Exception as exc:  # a Kerberos error, say; pure-sasl's messages hold no secret
        raise LocalSaslError(f"{what} cannot start: {type(exc).__name__}: {exc}") from None


async def authenticate(conn: Connection, login: SaslLogin) -> None:
    """Log `conn` in with `login`; returns once the mechanism is complete.

    Blocks for a few round trips, each bounded by the connection's read
    timeout (its reader must be running); GSSAPI's calls to the KDC run in a
    worker thread (a cancellation waits for the one under way).  Raises
    `AuthFailedError` when the server refuses the login or the mechanism fails
    (naming the mechanism, the user and the server; `LocalSaslError` for a
    Kerberos failure on the client's side), `ConnectionLostError` when the
    connection drops meanwhile.  Cancelled, the connection is left half logged in: its caller
    drops it.
    """
    host, port = conn.address
    where = f"{host}:{port}"
    what = f"SASL {login.mechanism} login{login.who} to {where}"
    # GSSAPI talks to the KDC (blocking network calls): in a worker thread, not the loop.
    blocking = login.mechanism == "GSSAPI"
    if blocking:
        client = await anyio.to_thread.run_sync(_mechanism, login, host, what)
    else:
        client = _mechanism(login, host, what)
    try:
        challenge: bytes | None = None
        for _ in range(_MAX_ROUNDS):
            try:
                if blocking:
                    token = await anyio.to_thread.run_sync(client.process, challenge)
                else:
                    token = client.process(challenge)
            except Exception as exc:
                # pure-sasl's errors say what went wrong and never hold the password.
                # Kerberos errors are local (a KDC out of reach, an expired ticket);
                # DIGEST-MD5 fails here only for a server that did not prove itself.
                failure = LocalSaslError if blocking else AuthFailedError
                raise failure(f"{what} failed: {type(exc).__name__}: {exc}") from None
            if client.complete and not token:
                return
            pending = conn.submit(_wire.sasl_request(token or b""), parse=_replies.parse_sasl)
            err, _, _ = await wait_reply(pending)
            if err in (_AUTH_FAILED, _SASL_REQUIRED):
                why = (
                    "wrong user name or password, or a user the server does not know"
                    if login.mechanism == "DIGEST-MD5"
                    else "a principal the server does not accept"
                )
                raise AuthFailedError(f"{what} refused by the server ({why})")
            if err:
                raise AuthFailedError(f"{what} failed: the server answered error {err}")
            value = pending.value
            challenge = value if isinstance(value, bytes) else b""
            if client.complete:
                return
            if not challenge:
                # A server without a SASL login of its own (no JAAS "Server" section)
                # answers OK with no challenge, and the mechanism cannot go on.
                raise AuthFailedError(
                    f"{what} failed: the server sent no challenge (is SASL set up on it: "
                    "the SASL authProvider and a JAAS 'Server' section?)"
                )
        raise AuthFailedError(
            f"{what} did not complete in {_MAX_ROUNDS} rounds (is SASL enabled on the server?)"
        )
    finally:
        client.dispose()


async def probe_required(conn: Connection) -> None:
    """Ping once: `AuthFailedError` if the server refuses a client that did not log in.

    One round trip, bounded by the connection's read timeout; raises
    `ConnectionLostError` if the connection drops meanwhile.
    """
    err, _, _ = await conn.call(_wire.ping_request(), xid=_wire.PING_XID)
    if err == _SASL_REQUIRED:
        host, port = conn.address
        raise AuthFailedError(
            f"{host}:{port} requires a SASL login and none is configured "
            "(set AIOCOORD_SASL_MECHANISM with its user and password)"
        )
