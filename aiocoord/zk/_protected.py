"""Curator's protected create: a node name that lets its creator find it after a lost reply."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import suppress
from typing import TYPE_CHECKING

from ..errors import ConnectionLostError, NoNodeError
from .paths import basename, join, parent, validate_path
from .types import Created, CreateMode

if TYPE_CHECKING:
    from .client import ZkClient

__all__ = ("PROTECTED_PREFIX", "create_protected", "protected_name")

log = logging.getLogger("aiocoord.zk.client")

PROTECTED_PREFIX = "_c_"  # Curator's ProtectedUtils prefix


def protected_name(name: str, node_id: str | None = None) -> tuple[str, str]:
    """Curator's protected node name ``_c_<uuid>-<name>`` and the uuid used."""
    node_id = node_id or str(uuid.uuid4())
    return f"{PROTECTED_PREFIX}{node_id}-{name}", node_id


async def create_protected(
    client: ZkClient,
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
    deadline = time.monotonic() + client.timing.protected_create_window
    while True:
        try:
            return await client.create(full, data, mode=mode, make_parents=make_parents)
        except ConnectionLostError as exc:  # includes SessionExpiredError
            log.debug("protected create of %s interrupted: %s", full, exc)
            if time.monotonic() >= deadline:
                raise
        found = await _find_protected(client, parent(path), marker, deadline)
        if found is not None:
            return found


async def _find_protected(
    client: ZkClient, parent_path: str, marker: str, deadline: float
) -> Created | None:
    while True:
        try:
            names = await client.children(parent_path)
        except NoNodeError:
            return None
        except ConnectionLostError:
            client.session.ensure_open()
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
            if stat.ephemeral_owner and stat.ephemeral_owner != client.session_id:
                with suppress(NoNodeError):
                    await client.delete(child, version=stat.version)
                return None
            return Created(child, stat)
        return None
