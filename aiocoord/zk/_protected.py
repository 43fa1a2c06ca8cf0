"""Curator's protected create: a node name that lets its creator find it after a lost reply."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from ..errors import ConnectionLostError, NoNodeError
from .paths import basename, join, parent, validate_path
from .types import Created, CreateMode, Stat

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("PROTECTED_PREFIX", "create_found", "create_protected", "protected_name")

log = logging.getLogger("aiocoord.zk.client")

PROTECTED_PREFIX = "_c_"  # Curator's ProtectedUtils prefix


class _Requests(Protocol):
    """The requests of `ZkClient` a protected create is made of."""

    async def create(
        self,
        path: str,
        data: bytes = ...,
        *,
        mode: CreateMode = ...,
        make_parents: bool = ...,
        parent_mode: CreateMode = ...,
        list_parent: bool = ...,
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
    list_parent: bool = False,
) -> Created:
    """`ZkClient.create_protected`, through the client's own create, children and exists."""
    validate_path(path, sequential=mode.sequential)
    name, node_id = protected_name(basename(path), node_id)
    full = join(parent(path), name) if parent(path) != "/" else "/" + name
    marker = f"{PROTECTED_PREFIX}{node_id}-"
    return await _create_found(
        client, session, full, data, mode, marker, make_parents, None, list_parent
    )


async def create_found(
    client: _Requests,
    session: ZkSession,
    path: str,
    data: bytes,
    *,
    mode: CreateMode,
    prefix: str,
    parent_mode: CreateMode,
    list_parent: bool = False,
) -> Created:
    """`ZkClient.create_findable`: create `path`, whose name starts with `prefix`; after a
    connection loss, find it again by that prefix (kazoo names its lock nodes this way)."""
    validate_path(path, sequential=mode.sequential)
    if not prefix or not basename(path).startswith(prefix):
        raise ValueError(f"the name of {path} must start with the prefix {prefix!r}")
    return await _create_found(
        client, session, path, data, mode, prefix, True, parent_mode, list_parent
    )


async def _create_found(
    client: _Requests,
    session: ZkSession,
    full: str,
    data: bytes,
    mode: CreateMode,
    marker: str,
    make_parents: bool,
    parent_mode: CreateMode | None,
    list_parent: bool,
) -> Created:
    """Create `full` (parents as `parent_mode`, None: containers); found again by `marker`.

    `list_parent`: the parent's children listed behind the create, or (found
    again) the listing that found it, which was made after the create.
    """
    deadline = time.monotonic() + session.timing.protected_create_window
    while True:
        try:
            if parent_mode is None:
                return await client.create(
                    full, data, mode=mode, make_parents=make_parents, list_parent=list_parent
                )
            return await client.create(
                full,
                data,
                mode=mode,
                make_parents=make_parents,
                parent_mode=parent_mode,
                list_parent=list_parent,
            )
        except ConnectionLostError as exc:  # includes SessionExpiredError
            log.debug("protected create of %s interrupted: %s", full, exc)
            if time.monotonic() >= deadline:
                raise
        found = await _find_protected(client, session, parent(full), marker, deadline)
        if found is not None:
            return found if list_parent else replace(found, listing=None)


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
            return Created(child, stat, tuple(names))
        return None
