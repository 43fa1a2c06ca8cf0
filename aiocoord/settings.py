"""`Settings`: how to reach ZooKeeper and how to treat the session.

Read from ``AIOCOORD_*`` environment variables and a ``.env`` file; explicit
arguments to `connect()` override them and are validated the same way.  Any
invalid value raises `ConfigError` naming the field and showing the value (and
the variable, when it came from the environment); the digest credentials and
the SASL password are never shown.  An unknown ``AIOCOORD_*`` variable is logged at WARNING.
"""

from __future__ import annotations

import os
import ssl
from typing import Any, Literal

from pydantic import SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._paths import validate_path
from ._settings_env import config_error, warn_unknown_variables
from .errors import ConfigError

__all__ = ("Settings", "parse_hosts")


def parse_hosts(hosts: str) -> tuple[list[tuple[str, int]], str | None]:
    """Split ``"h1:2181,h2:2181/chroot"`` into ``[(host, port), ...]`` and the chroot.

    A missing port means 2181; IPv6 literals are written ``[::1]:2181``.
    Raises `ValueError` with a message naming the bad entry.
    """
    if not isinstance(hosts, str) or not hosts.strip():
        raise ValueError("must be a non-empty 'host:port[,host:port...][/chroot]' string")
    text = hosts.strip()
    chroot: str | None = None
    slash = text.find("/")
    if slash >= 0:
        chroot = text[slash:]
        text = text[:slash]
    result: list[tuple[str, int]] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            raise ValueError(f"empty entry in host list {hosts!r}")
        if entry.startswith("["):
            end = entry.find("]")
            if end < 0:
                raise ValueError(f"unclosed '[' in {entry!r}")
            host, rest = entry[1:end], entry[end + 1 :]
            port_text = rest[1:] if rest.startswith(":") else ""
            if rest and not rest.startswith(":"):
                raise ValueError(f"unexpected text after ']' in {entry!r}")
        else:
            host, _, port_text = entry.partition(":")
        if not host:
            raise ValueError(f"missing host name in {entry!r}")
        port = 2181
        if port_text:
            if not port_text.isdigit():
                raise ValueError(f"port {port_text!r} of {entry!r} is not a number")
            port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(f"port {port} of {entry!r} is out of range")
        result.append((host, port))
    if chroot is not None and chroot != "/":
        validate_path(chroot)
    elif chroot == "/":
        chroot = None
    return result, chroot


class Settings(BaseSettings):
    """Connection settings; every field can come from ``AIOCOORD_<FIELD>``.

    Times are in seconds.  `session_lost_fraction` is Curator's
    "session expiration percent": a SUSPENDED connection is declared LOST once
    that fraction of the negotiated session timeout has passed since the
    server was last heard from, without waiting for the server to say so.
    """

    model_config = SettingsConfigDict(
        env_prefix="AIOCOORD_", env_file=".env", extra="ignore", frozen=True
    )

    hosts: str = "127.0.0.1:2181"
    """Comma-separated ``host:port`` list, optionally followed by ``/chroot``."""
    session_timeout: float = 10.0
    """Requested session timeout; the server may negotiate it into its own bounds."""
    connect_timeout: float = 15.0
    """How long `connect()` waits for the first session before giving up."""
    request_timeout: float | None = None
    """Deadline of one request, waiting for a connection included; None: the session timeout."""
    namespace: str | None = None
    """A chroot applied to every path (created on first connect, as Curator does)."""
    auth: SecretStr | None = None
    """Digest credentials ``user:password``, sent again on every new connection (never shown)."""
    world_readable: bool = False
    """With `auth` or SASL, let every client read (never change) the nodes this session creates."""
    read_only: bool = False
    """Accept a read-only server when no read-write one is reachable (READ_ONLY state)."""
    session_lost_fraction: float = 1.0
    """Fraction of the session timeout after the last server contact at which SUSPENDED becomes LOST."""
    tls: bool = False
    """Connect with TLS (to the servers' ``secureClientPort``); implied by any ``tls_*`` file."""
    tls_ca_file: str | None = None
    """PEM file of the CA(s) that sign the servers' certificates (None: the system's CAs)."""
    tls_cert_file: str | None = None
    """PEM client certificate, for servers that require one (``ssl.clientAuth=need``)."""
    tls_key_file: str | None = None
    """PEM private key of `tls_cert_file`."""
    tls_verify: bool = True
    """Verify the server's certificate and host name (turn off only for experiments)."""
    tls_server_name: str | None = None
    """Host name to verify instead of the one in `hosts`."""
    randomize_hosts: bool = True
    """Shuffle the host list once, so a fleet spreads over the ensemble (False: try them in order)."""
    follow_ensemble: bool = True
    """Follow the ensemble's config (``/zookeeper/config``): a member added or removed by reconfig is used from the next connection."""
    max_packet: int = 0xFFFFF + 16 * 1024
    """Longest reply read, in bytes (Java's ``jute.maxbuffer`` plus headers); a longer one fails its request only."""
    sasl_mechanism: Literal["DIGEST-MD5", "GSSAPI"] | None = None
    """SASL login on every connection before any request: ``DIGEST-MD5`` or ``GSSAPI`` (Kerberos)."""
    sasl_username: str | None = None
    """The SASL user (DIGEST-MD5: a ``user_<name>`` of the server's JAAS file)."""
    sasl_password: SecretStr | None = None
    """The SASL password (DIGEST-MD5; never shown)."""
    sasl_service: str = "zookeeper"
    """The service name the servers log in as (their principal's first part, for GSSAPI)."""

    def __init__(self, **values: Any) -> None:
        config = type(self).model_config
        warn_unknown_variables(type(self).model_fields, _env_file(config.get("env_file")))
        error: ConfigError | None = None
        try:
            super().__init__(**values)
        except ValidationError as exc:
            error = config_error(exc, values)
        if error is not None:
            # Raised outside the handler: the ValidationError shows input values, the secret too.
            raise error

    @field_validator("hosts")
    @classmethod
    def _check_hosts(cls, value: str) -> str:
        parse_hosts(value)
        return value.strip()

    @field_validator("session_timeout")
    @classmethod
    def _check_session_timeout(cls, value: float) -> float:
        if not 0.1 <= value <= 3600:
            raise ValueError("must be between 0.1 and 3600 seconds")
        return value

    @field_validator("connect_timeout")
    @classmethod
    def _check_connect_timeout(cls, value: float) -> float:
        if not 0 < value <= 3600:
            raise ValueError("must be more than 0 and at most 3600 seconds")
        return value

    @field_validator("request_timeout")
    @classmethod
    def _check_request_timeout(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value <= 3600:
            raise ValueError("must be more than 0 and at most 3600 seconds")
        return value

    @field_validator("max_packet")
    @classmethod
    def _check_max_packet(cls, value: int) -> int:
        if not 4096 <= value <= 0x7FFFFFFF:
            raise ValueError("must be between 4096 and 2147483647 bytes")
        return value

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str | None) -> str | None:
        if value is None or value in ("", "/"):
            return None
        validate_path(value)
        return value

    @field_validator("auth")
    @classmethod
    def _check_auth(cls, value: SecretStr | None) -> SecretStr | None:
        secret = None if value is None else value.get_secret_value()
        if secret is not None and (":" not in secret or secret.startswith(":")):
            raise ValueError("must be 'user:password'")
        return value

    @field_validator("sasl_mechanism", mode="before")
    @classmethod
    def _upper_mechanism(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().upper()
            return value or None
        return value

    @field_validator("sasl_username", "sasl_service")
    @classmethod
    def _check_sasl_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError("must be a non-empty name without surrounding spaces")
        return value

    @field_validator("session_lost_fraction")
    @classmethod
    def _check_fraction(cls, value: float) -> float:
        if not 0 < value <= 1.0:
            raise ValueError("must be more than 0 and at most 1.0")
        return value

    @field_validator("tls_ca_file", "tls_cert_file", "tls_key_file")
    @classmethod
    def _check_file(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isfile(value):
            raise ValueError(f"no such file: {value!r}")
        return value

    @model_validator(mode="after")
    def _check_together(self) -> Settings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        _, chroot = parse_hosts(self.hosts)
        if chroot is not None and self.namespace is not None:
            raise ValueError("give the chroot either in hosts or as namespace, not both")
        if self.world_readable and self.auth is None and self.sasl_mechanism is None:
            raise ConfigError(
                "world_readable",
                "needs auth or sasl_mechanism: without credentials every node is open to all",
            )
        # Half-set TLS would silently connect in plain text.
        if not self.use_tls and self.tls_server_name is not None:
            raise ConfigError("tls_server_name", f"is set but TLS is off: {_TLS_ON}")
        if not self.use_tls and not self.tls_verify:
            raise ConfigError("tls_verify", f"is off but TLS is off too: {_TLS_ON}")
        self.ssl_context()  # files that are not PEM fail now, not at connect()
        self._check_sasl()
        return self

    def _check_sasl(self) -> None:
        mechanism = self.sasl_mechanism
        if mechanism is None:
            # Half-set SASL would silently connect without logging in.
            for field in ("sasl_username", "sasl_password"):
                if getattr(self, field) is not None:
                    raise ConfigError(field, "is set but sasl_mechanism is not: " + _SASL_ON)
        elif mechanism == "DIGEST-MD5":
            for field in ("sasl_username", "sasl_password"):
                if getattr(self, field) is None:
                    raise ConfigError(field, "is needed for sasl_mechanism DIGEST-MD5")
        elif not _kerberos_installed():
            raise ConfigError(
                "sasl_mechanism", "GSSAPI needs the kerberos package: pip install 'aiocoord[sasl]'"
            )
        elif self.sasl_password is not None:
            raise ConfigError(
                "sasl_password",
                "is not used with GSSAPI: Kerberos takes the credentials from a keytab "
                "(KRB5_CLIENT_KTNAME) or the ticket cache (kinit)",
            )

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The parsed host list."""
        return parse_hosts(self.hosts)[0]

    @property
    def use_tls(self) -> bool:
        """Whether connections use TLS."""
        return self.tls or self.tls_ca_file is not None or self.tls_cert_file is not None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context these settings describe, or None for plain TCP.

        Raises `ConfigError` naming the ``tls_*`` file that is not usable PEM.
        """
        if not self.use_tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.tls_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise _pem_error("tls_ca_file", self.tls_ca_file, "CA certificates", exc) from None
        if self.tls_cert_file and self.tls_key_file:
            _load_client_cert(context, self.tls_cert_file, self.tls_key_file)
        if not self.tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    @property
    def chroot(self) -> str | None:
        """The effective chroot: `namespace`, or the one written after the host list."""
        return self.namespace or parse_hosts(self.hosts)[1]

    @classmethod
    def build(cls, base: Settings | str | None = None, **overrides: Any) -> Settings:
        """Make validated Settings from a Settings, a host string, or the environment.

        Raises `ConfigError` naming the first invalid field.
        """
        if isinstance(base, Settings):
            merged = base.model_dump()  # the secret stays a SecretStr
            unknown = set(overrides) - set(cls.model_fields)
            if unknown:
                raise ConfigError(sorted(unknown)[0], "unknown setting")
            merged.update(overrides)
            return cls(**merged)
        if base is not None:
            if not isinstance(base, str):
                raise ConfigError(
                    "hosts", f"expected a Settings or a host string, got {type(base).__name__}"
                )
            overrides = {"hosts": base, **overrides}
        unknown = set(overrides) - set(cls.model_fields)
        if unknown:
            raise ConfigError(sorted(unknown)[0], "unknown setting")
        return cls(**overrides)


_SASL_ON = "set sasl_mechanism (AIOCOORD_SASL_MECHANISM=DIGEST-MD5 or GSSAPI), or unset it"
_TLS_ON = "set tls=True (AIOCOORD_TLS=true) or a tls_*_file, or leave it unset"


def _kerberos_installed() -> bool:
    """Whether pure-sasl's GSSAPI can run (it needs the ``kerberos`` package)."""
    import importlib.util

    return importlib.util.find_spec("kerberos") is not None


def _env_file(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _EncryptedKey(Exception):
    pass


def _ask_password() -> str:
    raise _EncryptedKey  # never OpenSSL's interactive prompt


def _load_client_cert(context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    """Load the client certificate and key into `context`; `ConfigError` names the bad file."""
    try:
        # A scratch context: the certificate must parse as PEM, but is not a CA of ours.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert_file)
    except (ssl.SSLError, OSError) as exc:
        raise _pem_error("tls_cert_file", cert_file, "a certificate", exc) from None
    try:
        context.load_cert_chain(cert_file, key_file, password=_ask_password)
    except _EncryptedKey:
        raise ConfigError(
            "tls_key_file", f"{key_file!r} is encrypted; give an unencrypted PEM key"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise _pem_error(
            "tls_key_file", key_file, "the private key of tls_cert_file", exc
        ) from None


def _pem_error(field: str, path: str | None, what: str, exc: BaseException) -> ConfigError:
    reason = getattr(exc, "reason", None) or exc.__class__.__name__
    return ConfigError(field, f"{path!r} does not hold {what} in PEM form ({reason})")
