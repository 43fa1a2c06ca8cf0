"""What a user sees when settings are wrong: secrets never printed, half-set TLS refused,
bad environment variables named with their value, misspelled ones warned about, and a
session timeout lowered by the server logged at WARNING."""

from __future__ import annotations

import json
import logging
import ssl
import traceback
from pathlib import Path

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, Settings
from aiocoord.testing import ZooKeeperServer

SECRET = "wonderland-7f3a"


def _everything_printed(exc: BaseException) -> str:
    """The error as a traceback shows it, with its whole chain and context."""
    text = "".join(traceback.format_exception(exc))
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        text += repr(link) + str(link) + repr(getattr(link, "args", ()))
        link = link.__cause__ or link.__context__
    return text


# --- the digest secret -----------------------------------------------------------------------------


def test_auth_secret_is_never_printed() -> None:
    s = Settings.build("h:1", auth=f"alice:{SECRET}")
    shown = [
        repr(s),
        str(s),
        repr(s.model_dump()),
        s.model_dump_json(),
        json.dumps(s.model_dump(mode="json")),
    ]
    for text in shown:
        assert SECRET not in text, text
    assert s.auth is not None and s.auth.get_secret_value() == f"alice:{SECRET}"
    again = Settings.build(s, session_timeout=3)  # merged settings keep the real secret
    assert again.auth is not None and again.auth.get_secret_value() == f"alice:{SECRET}"


@pytest.mark.parametrize(
    "overrides",
    [
        {"auth": SECRET},  # the secret itself is invalid (no 'user:')
        {"auth": f":{SECRET}"},
        {"auth": f"alice:{SECRET}", "session_timeout": "soon"},  # another field is invalid
        {"auth": f"alice:{SECRET}", "namespace": "/a", "hosts": "h:1/b"},  # a model check
    ],
)
def test_auth_secret_is_not_in_config_errors(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(**overrides)  # type: ignore[arg-type]
    assert SECRET not in _everything_printed(info.value)


def test_auth_secret_from_the_environment_is_not_in_config_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIOCOORD_AUTH", SECRET)
    with pytest.raises(ConfigError) as info:
        Settings()
    assert info.value.field == "auth" and "AIOCOORD_AUTH" in str(info.value)
    assert SECRET not in _everything_printed(info.value)


# --- the SASL password and half-set SASL ---------------------------------------------------------


def test_sasl_password_is_never_printed() -> None:
    s = Settings.build(
        "h:1", sasl_mechanism="DIGEST-MD5", sasl_username="alice", sasl_password=SECRET
    )
    for text in (repr(s), str(s), repr(s.model_dump()), s.model_dump_json()):
        assert SECRET not in text, text
    again = Settings.build(s, session_timeout=3)
    assert again.sasl_password is not None and again.sasl_password.get_secret_value() == SECRET
    from aiocoord.zk._sasl import SaslLogin

    login = SaslLogin.from_settings(again)
    assert login is not None and SECRET not in repr(login)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"sasl_password": SECRET}, "sasl_password"),  # no mechanism: SASL half-set
        ({"sasl_username": "alice"}, "sasl_username"),
        ({"sasl_mechanism": "DIGEST-MD5", "sasl_password": SECRET}, "sasl_username"),
        ({"sasl_mechanism": "DIGEST-MD5", "sasl_username": "alice"}, "sasl_password"),
        ({"sasl_mechanism": "PLAIN", "sasl_password": SECRET}, "sasl_mechanism"),
        (
            {"sasl_mechanism": "DIGEST-MD5", "sasl_username": " ", "sasl_password": SECRET},
            "sasl_username",
        ),
    ],
)
def test_sasl_settings_are_checked_without_showing_the_password(
    overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", **overrides)
    assert info.value.field == field
    assert SECRET not in _everything_printed(info.value)


def test_sasl_password_from_the_environment_is_not_in_config_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIOCOORD_SASL_PASSWORD", SECRET)
    with pytest.raises(ConfigError) as info:
        Settings()
    assert info.value.field == "sasl_password"
    assert SECRET not in _everything_printed(info.value)


# --- half-set TLS ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tls_server_name": "zk.internal"}, "tls_server_name"),
        ({"tls_verify": False}, "tls_verify"),
    ],
)
def test_tls_options_without_tls_are_refused(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", **overrides)
    assert info.value.field == field and "tls" in str(info.value)
    # With TLS on, the same options are fine.
    s = Settings.build("h:1", tls=True, **overrides)
    assert s.use_tls


def test_tls_files_that_are_not_pem_fail_at_settings_time(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("this is not a certificate\n")
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", tls_ca_file=str(junk))
    assert info.value.field == "tls_ca_file" and str(junk) in str(info.value)
    assert not isinstance(info.value, ssl.SSLError)
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", tls_cert_file=str(junk), tls_key_file=str(junk))
    assert info.value.field == "tls_cert_file"


def test_a_tls_key_that_is_not_pem_names_the_key(tmp_path: Path) -> None:
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    done = subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
            "-out", str(cert), "-days", "1", "-subj", "/CN=client",
        ],
        capture_output=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip("openssl is not installed")
    assert Settings.build("h:1", tls_cert_file=str(cert), tls_key_file=str(key)).use_tls
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", tls_cert_file=str(cert), tls_key_file=str(junk))
    assert info.value.field == "tls_key_file"


# --- environment variables ---------------------------------------------------------------------------


def test_bad_environment_value_names_the_variable_and_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIOCOORD_SESSION_TIMEOUT", "10s")
    with pytest.raises(ConfigError) as info:
        Settings()
    assert info.value.field == "session_timeout"
    assert "AIOCOORD_SESSION_TIMEOUT='10s'" in str(info.value)
    # The same through connect(), which reads the environment too.
    with pytest.raises(ConfigError, match="AIOCOORD_SESSION_TIMEOUT='10s'"):
        aiocoord.connect()


def test_bad_argument_value_is_shown() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("h:1", session_timeout="soon")
    assert info.value.field == "session_timeout" and "'soon'" in str(info.value)
    assert "AIOCOORD_" not in str(info.value)


def test_misspelled_variable_is_warned_about_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIOCOORD_SESION_TIMEOUT", "3")
    monkeypatch.setenv("AIOCOORD_ZZZ_NOTHING_LIKE_IT", "1")
    monkeypatch.setenv("AIOCOORD_HOSTS", "h:1")
    monkeypatch.setenv("AIOCOORD_ZK_DIR", "/tmp/somewhere")  # the CLI's own variable
    with caplog.at_level(logging.WARNING, logger="aiocoord"):
        s = Settings()
    assert s.session_timeout == 10.0  # the misspelled one did nothing...
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    typo = [m for m in warned if "AIOCOORD_SESION_TIMEOUT" in m]
    assert len(typo) == 1 and "did you mean AIOCOORD_SESSION_TIMEOUT?" in typo[0], warned
    assert any("AIOCOORD_ZZZ_NOTHING_LIKE_IT" in m for m in warned), warned
    assert not any("AIOCOORD_HOSTS" in m or "AIOCOORD_ZK_DIR" in m for m in warned), warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="aiocoord"):
        Settings()
    assert not caplog.records  # ...and is said once per process, not at every Settings()


# --- the negotiated session timeout ------------------------------------------------------------------


@pytest.mark.anyio
async def test_session_timeout_lowered_by_the_server_is_a_warning(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The test server's maxSessionTimeout is 30 s: asking for 600 s gets 30 s."""
    with caplog.at_level(logging.INFO, logger="aiocoord"), anyio.fail_after(20):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=600
        ) as coord:
            assert coord.session_timeout == 30.0
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4
        ):
            pass
    lowered = [r for r in caplog.records if "lowered" in r.getMessage()]
    assert [r.levelno for r in lowered] == [logging.WARNING], caplog.text
    assert "timeout 30.0s, lowered by the server from 600s" in lowered[0].getMessage()
    sessions = [r for r in caplog.records if r.getMessage().startswith("session 0x")]
    assert logging.INFO in [r.levelno for r in sessions]  # an unchanged timeout stays at INFO
