"""A throwaway MIT Kerberos realm on loopback, for the GSSAPI tests.

`KerberosRealm` makes a KDC database in its own folder (its own ``krb5.conf``
and ``kdc.conf``, nothing of the machine's is read or changed), adds
principals with random keys, exports keytabs and runs ``krb5kdc`` in the
foreground on a free port; `stop` kills it by its own process handle.
`missing()` says why a realm cannot be made here (no KDC installed, no
``kerberos`` Python package), for a skip with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from aiocoord.server import free_ports

REALM = "AIOCOORD.TEST"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in _SBIN:
        candidate = Path(folder) / name
        if candidate.is_file():
            return str(candidate)
    return None


def missing() -> str | None:
    """Why no realm can be made here (None: it can)."""
    absent = [name for name in _TOOLS if _tool(name) is None]
    if absent:
        return (
            f"MIT Kerberos KDC tools not installed ({', '.join(absent)}): "
            "apt-get install krb5-kdc krb5-admin-server krb5-user"
        )
    if importlib.util.find_spec("kerberos") is None:
        return "the kerberos package is not installed: pip install 'aiocoord[sasl]'"
    return None


class KerberosRealm:
    """A KDC for `REALM` on 127.0.0.1, its files under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (self.port,) = free_ports(1)
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = directory / "krb5kdc.out"

    @property
    def env(self) -> dict[str, str]:
        """The variables that point MIT Kerberos (and only it) at this realm."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, *args: str) -> None:
        tool = _tool(args[0])
        assert tool is not None
        done = subprocess.run(
            [tool, *args[1:]],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()}")

    def start(self) -> KerberosRealm:
        """Make the realm (the first time) and run its KDC; returns once it listens."""
        if not (self.directory / "stash").exists():
            self._create()
        self._spawn()
        return self

    def _create(self) -> None:
        d = self.directory
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"    default_realm = {REALM}\n"
            "    dns_lookup_realm = false\n"
            "    dns_lookup_kdc = false\n"
            "    dns_canonicalize_hostname = false\n"
            "    rdns = false\n"
            "    udp_preference_limit = 1\n"  # TCP only, for MIT and Java alike
            "[realms]\n"
            f"    {REALM} = {{\n"
            f"        kdc = 127.0.0.1:{self.port}\n"
            "    }\n"
            "[domain_realm]\n"
            f"    localhost = {REALM}\n"
        )
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"    kdc_ports = {self.port}\n"
            f"    kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f"    {REALM} = {{\n"
            f"        database_name = {d / 'principal'}\n"
            f"        key_stash_file = {d / 'stash'}\n"
            f"        acl_file = {d / 'kadm5.acl'}\n"
            "        max_life = 1h\n"
            "        supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n"
            "    }\n"
            "[logging]\n"
            f"    kdc = FILE:{d / 'kdc.log'}\n"
        )
        (d / "kadm5.acl").write_text("")
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", "throwaway-master-key")

    def _spawn(self) -> None:
        tool = _tool("krb5kdc")
        assert tool is not None
        with self._log.open("ab") as out:
            self._proc = subprocess.Popen(
                [tool, "-n", "-r", REALM],
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 20
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {self._log.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("krb5kdc did not listen within 20 s") from None
                time.sleep(0.05)

    def add_principal(self, name: str, keytab: Path) -> str:
        """Add `name` with a random key and export it to `keytab`; returns the full principal."""
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {name}")
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {keytab} {name}")
        return f"{name}@{REALM}"

    def stop(self) -> None:
        """Kill the KDC (by its own process handle); `start` runs it again on the same port."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
