"""SASL GSSAPI (Kerberos): a throwaway MIT realm, a ZooKeeper server that requires it, a keytab.

Skipped, with the reason, only when the KDC tools or the kerberos package
cannot be had (scripts/setup installs both).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import aiocoord
from aiocoord import AuthFailedError, ConnectionState, NoAuthError
from aiocoord.testing import FaultProxy, ZooKeeperServer
from aiocoord.zk import ACL
from tests.helpers import recording

from ._kerberos import REALM, KerberosRealm, missing

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosRealm]:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    kdc = KerberosRealm(tmp_path_factory.mktemp("krb5")).start()
    try:
        yield kdc
    finally:
        kdc.stop()


@pytest.fixture(scope="module")
def kerberized(realm: KerberosRealm) -> Iterator[tuple[ZooKeeperServer, Path, Path]]:
    """A server logged in as zookeeper/localhost; yields it, the client keytab and one unknown."""
    d = realm.directory
    server_principal = realm.add_principal("zookeeper/localhost", d / "zk.keytab")
    realm.add_principal("app", d / "app.keytab")
    realm.add_principal("stranger", d / "stranger.keytab")
    jaas = d / "jaas.conf"
    jaas.write_text(
        "Server {\n"
        "    com.sun.security.auth.module.Krb5LoginModule required\n"
        "    useKeyTab=true\n"
        f'    keyTab="{d / "zk.keytab"}"\n'
        "    storeKey=true\n"
        "    useTicketCache=false\n"
        f'    principal="{server_principal}";\n'
        "};\n"
    )
    server = ZooKeeperServer(
        extra_config={
            "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "sessionRequireClientSASLAuth": "true",
            "kerberos.removeRealmFromPrincipal": "true",
        },
        jvm_args=[
            f"-Djava.security.auth.login.config={jaas}",
            f"-Djava.security.krb5.conf={realm.krb5_conf}",
        ],
    )
    with server:
        yield server, d / "app.keytab", d / "stranger.keytab"


@pytest.fixture
def kerberos_env(
    realm: KerberosRealm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.MonkeyPatch:
    """The client side of the realm: its krb5.conf, and a ticket cache of the test's own."""
    monkeypatch.setenv("KRB5_CONFIG", str(realm.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
    return monkeypatch


async def test_gssapi_login_with_a_keytab(
    kerberized: tuple[ZooKeeperServer, Path, Path],
    kerberos_env: pytest.MonkeyPatch,
    zk_chroot: str,
) -> None:
    server, keytab, _ = kerberized
    kerberos_env.setenv("KRB5_CLIENT_KTNAME", str(keytab))
    hosts = f"localhost:{server.port}"  # the host part of the server's principal
    with anyio.fail_after(60):
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, sasl_mechanism="GSSAPI", sasl_username=f"app@{REALM}"
        ) as coord:
            assert ("sasl", "app") in await coord.client.whoami()
            await coord.client.create("/mine", b"kerberos")
            acl, _ = await coord.client.get_acl("/mine")
            assert acl == [ACL(ACL.ALL, "sasl", "app")]
            # The stranger's key is not in the keytab of KRB5_CLIENT_KTNAME: refused at once.
            with pytest.raises(AuthFailedError, match=f"GSSAPI login as 'stranger@{REALM}'"):
                async with aiocoord.connect(
                    hosts, sasl_mechanism="GSSAPI", sasl_username=f"stranger@{REALM}"
                ):
                    pass


async def test_gssapi_without_credentials_is_auth_failed(
    kerberized: tuple[ZooKeeperServer, Path, Path],
    kerberos_env: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _, _ = kerberized
    kerberos_env.setenv("KRB5_CLIENT_KTNAME", str(tmp_path / "no-such.keytab"))
    caplog.set_level(logging.INFO)
    with anyio.fail_after(60), pytest.raises(AuthFailedError, match="SASL GSSAPI") as info:
        async with aiocoord.connect(
            f"localhost:{server.port}", sasl_mechanism="GSSAPI", sasl_username=f"app@{REALM}"
        ):
            pass
    assert f"localhost:{server.port}" in str(info.value)


async def test_the_sasl_scheme_guards_nodes_between_principals(
    kerberized: tuple[ZooKeeperServer, Path, Path],
    kerberos_env: pytest.MonkeyPatch,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    server, app_keytab, stranger_keytab = kerberized
    hosts = f"localhost:{server.port}"
    with anyio.fail_after(60):
        kerberos_env.setenv("KRB5_CLIENT_KTNAME", str(app_keytab))
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, sasl_mechanism="GSSAPI", sasl_username=f"app@{REALM}"
        ) as app:
            await app.client.create("/private", b"app's")
        kerberos_env.setenv("KRB5_CLIENT_KTNAME", str(stranger_keytab))
        kerberos_env.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'stranger-ccache'}")
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, sasl_mechanism="GSSAPI", sasl_username=f"stranger@{REALM}"
        ) as stranger:
            assert ("sasl", "stranger") in await stranger.client.whoami()
            with pytest.raises(NoAuthError):
                await stranger.client.get("/private")


async def test_a_kdc_out_of_reach_after_the_first_login_is_retried(
    kerberized: tuple[ZooKeeperServer, Path, Path],
    kerberos_env: pytest.MonkeyPatch,
    realm: KerberosRealm,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    """Not the server's refusal: the client tries again instead of giving up for good."""
    server, keytab, _ = kerberized
    kerberos_env.setenv("KRB5_CLIENT_KTNAME", str(keytab))
    with FaultProxy(*server.address) as proxy, anyio.fail_after(60):
        async with aiocoord.connect(
            f"localhost:{proxy.port}",
            namespace=zk_chroot,
            sasl_mechanism="GSSAPI",
            sasl_username=f"app@{REALM}",
            session_timeout=10.0,
        ) as coord:
            sid = coord.session_id
            realm.stop()
            (tmp_path / "ccache").unlink()  # no ticket left: the next login needs the KDC
            try:
                async with recording(coord) as rec:
                    proxy.cut()
                    await rec.wait_for(ConnectionState.SUSPENDED)
                    await anyio.sleep(1.5)  # logins fail meanwhile, on our side
                    assert coord.state is ConnectionState.SUSPENDED
            finally:
                realm.start()
            async with recording(coord) as rec:
                await rec.wait_for(ConnectionState.RECONNECTED, timeout=20)
            assert coord.session_id == sid
            assert ("sasl", "app") in await coord.client.whoami()
