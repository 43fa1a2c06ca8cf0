"""Curator's protected create: a node name that lets its creator find it after a lost reply."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import suppress
from typing import TYPE_CHECKING, Protocol

from ..errors import ConnectionLostError, NoNodeError
from .paths import basename, join, parent, validate_path
from .types import Created, CreateMode, Stat

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("PROTECTED_PREFIX", "create_protected", "protected_name")

log = logging.getLogger("aiocoord.zk.client")

PROTECTED_PREFIX = "_c_"  # Curator's ProtectedUtils prefix


class _Requests(Protocol):
    """The requests of `ZkClient` a protected create is made of."""

    async def create(
        self, path: str, data: bytes = ..., *, mode: CreateMode = ..., make_parents: bool = ...
    ) -> Created: ...
    async def children(self, path: str) -> list[str]: ...
    async def exists(self, path: str) -> Stat | None: ...
    async def delete(self, path: str, version: int = ...) -> None: ...


def protected_name(name: str, node_id: str | None = None) -> tuple[str, str]:
    """Curator's protected node name ``_c_<uuid>-<name>`` and the uuid used."""
    node_id = node_id or str(uuid.uuid4())
    return f"{PROTECTED_PREFIX}{node_id}-{name}", node_id


async def create_protected(
    client: _Requests,
    session: ZkSession,
    path: str,
    data: bytes,
    *,
    mode: CreateMode,
    make_parents: bool,
    node_id: str | None,
) -> Created:
    """`ZkClient.create_protected`, through the client's own create, children and exists."""
    validate_path(path, sequential=mode.sequential)
    name, node_id = protected_name(basename(path), node_id)
    full = join(parent(path), name) if parent(path) != "/" else "/" + name
    marker = f"{PROTECTED_PREFIX}{node_id}-"
    deadline = time.monotonic() + session.timing.protected_create_window
    while True:
        try:
            return await client.create(full, data, mode=mode, make_parents=make_parents)
        except ConnectionLostError as exc:  # includes SessionExpiredError
            log.debug("protected create of %s interrupted: %s", full, exc)
            if time.monotonic() >= deadline:
                raise
        found = await _find_protected(client, session, parent(path), marker, deadline)
        if found is not None:
            return found


async def _find_protected(
    client: _Requests, session: ZkSession, parent_path: str, marker: str, deadline: float
) -> Created | None:
    while True:
        try:
            names = await client.children(parent_path)
        except NoNodeError:
            return None
        except ConnectionLostError:
            session.ensure_open()
            if time.monotonic() >= deadline:
                raise
            continue
        for name in names:
            if not name.startswith(marker):
                continue
            child = join(parent_path, name)
            stat = await client.exists(child)
            if stat is None:
                return None
            if stat.ephemeral_owner and stat.ephemeral_owner != session.session_id:
                with suppress(NoNodeError):
                    await client.delete(child, version=stat.version)
                return None
            return Created(child, stat)
        return None
