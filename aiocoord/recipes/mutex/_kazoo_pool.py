"""kazoo's lease pool for ``semaphore(..., layout="kazoo")``: the pool and the taking of a lease.

kazoo 2.x's ``Semaphore`` (``kazoo/recipe/lock.py``), step for step: the pool
``<path>`` is persistent and holds `max_leases` (``_ensure_path``); holding
the guard lock ``<path>-__lock__``, a contender lists the pool with a child
watch and creates its lease node ``<path>/<uuid4 hex>`` only while fewer
than `max_leases` are there (``_get_lease``).  The semaphore module holds the
rest (the guard, the hold, the release).
"""

from __future__ import annotations

from ...errors import ConfigError, ConnectionLostError, NodeExistsError, NoNodeError
from ...session import Coordinator
from ...zk import CreateMode
from .._queue import OurNode, Waiter, connected_by, fired_by, grantable

__all__ = ("ensure_pool", "kazoo_lease")


async def ensure_pool(coord: Coordinator, pool: str, max_leases: int) -> None:
    """Create the pool with `max_leases` as its data (ASCII), parents persistent, if missing.

    A pool that says another number is a `ConfigError` naming ``max_leases``
    (kazoo raises ``ValueError``); data that is not a number is not checked,
    as in kazoo.  Connection losses are waited out.
    """
    client = coord.client
    while True:
        try:
            await client.create(
                pool,
                str(max_leases).encode("ascii"),
                mode=CreateMode.PERSISTENT,
                make_parents=True,
                parent_mode=CreateMode.PERSISTENT,
            )
            return
        except NodeExistsError:
            pass
        except (ConnectionLostError, TimeoutError):
            await coord.client.session.wait_connected()
            continue  # created or not: the next try says which
        try:
            data = (await client.get(pool)).data
        except NoNodeError:
            continue
        except (ConnectionLostError, TimeoutError):
            await coord.client.session.wait_connected()
            continue
        try:
            leases = int(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return  # kazoo ignores data that is not a number
        if leases != max_leases:
            raise ConfigError(
                "max_leases", f"{max_leases} differs from the {leases} that the pool {pool} holds"
            )
        return


async def kazoo_lease(
    coord: Coordinator,
    guard: Waiter,
    lease: OurNode,
    max_leases: int,
    data: bytes,
    deadline: float | None,
) -> bool | None:
    """Holding the guard: our lease node, once fewer than `max_leases` are in the pool.

    True: the lease is ours (connected, our node of this session); False: out
    of time; None: the guard or the lease was lost with a session (join the
    guard again).  A lease node deleted by someone is taken again.
    """
    client = coord.client
    while True:
        try:
            node = guard.node
            if node is None or node.owner != coord.client.session.session_id:
                return None
            names, watch = await client.children_watch(lease.path)
            try:
                ours = lease.node
                if ours is not None and ours.name not in names:
                    lease.node = ours = None
                if ours is None:
                    if len(names) >= max_leases:
                        if not await fired_by(watch, deadline):
                            return False
                        continue
                    ours = await lease.create("", data, mode=CreateMode.EPHEMERAL)
                if ours.owner != coord.client.session.session_id:
                    return None
                if grantable(coord, ours):
                    # Forgotten, not removed: a removeWatches would go out ahead of the
                    # guard's delete, which every waiter queues behind.
                    client.forget_watch(watch)
                    return True
                if not await connected_by(coord, deadline):
                    return False
            finally:
                client.remove_watch(watch)
        except NoNodeError:
            return None  # the pool went: the next round creates it again
        except (ConnectionLostError, TimeoutError):
            if not await connected_by(coord, deadline):
                return False
