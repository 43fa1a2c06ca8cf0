"""The host list a session connects to: its order, its changes, and each name's addresses now.

The list starts as the settings' hosts (shuffled once with `randomize_hosts`,
as the Java client does) and may be replaced while the session runs: by
`Coordinator.set_hosts`, or by the ensemble's config when it changes
(`_config.follow_ensemble`).  A new list is used from the next connection
attempt on; the current connection is kept.  A name is resolved again at
every attempt (`resolve`): a replaced Kubernetes pod keeps its name, not its
address, and a cached address would point at nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import socket
from collections.abc import Iterator, Sequence

__all__ = ("HostList", "format_hosts", "resolve")


def format_hosts(addresses: Sequence[tuple[str, int]]) -> str:
    """``h1:2181,h2:2181`` (IPv6 literals in brackets), as a host string is written."""
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in addresses)


class HostList:
    """The members to try, round robin; `replace` swaps the list for the next attempt."""

    def __init__(self, addresses: Sequence[tuple[str, int]], *, shuffle: bool) -> None:
        self._shuffle = shuffle
        self.given: tuple[tuple[str, int], ...] = ()
        self._order: list[tuple[str, int]] = []
        self._next = 0
        self.replace(addresses)

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._order)

    def next(self) -> tuple[str, int]:
        """The member the next attempt goes to."""
        address = self._order[self._next % len(self._order)]
        self._next += 1
        return address

    def replace(self, addresses: Sequence[tuple[str, int]]) -> bool:
        """Use `addresses` from the next attempt on; False (nothing changed) if it is the same set."""
        if not addresses:
            raise ValueError("a host list needs at least one host")
        new = tuple(dict.fromkeys(addresses))  # duplicates out, order kept
        if set(new) == set(self.given):
            return False
        self.given = new
        self._order = list(new)
        if self._shuffle:  # spread clients over the ensemble, as the Java client does
            random.shuffle(self._order)
        self._next = 0
        return True


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` has now, in the resolver's order; `socket.gaierror` if none.

    Asked again at every call, nothing cached; an IP literal is its own answer.
    """
    if _is_ip(host):
        return [host]
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not found:
        raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
    return found
