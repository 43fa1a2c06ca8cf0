"""Distributed job scheduler: three workers, typed jobs, one that fails, one worker that dies.

Runs against ``AIOCOORD_HOSTS`` if set, else against an embedded ZooKeeper
server.  Each worker has its own coordinator (its own session), as separate
processes would; one of them is elected assigner.  Midway its session is
expired on the server, as if the process had been killed: its jobs go back to
the queue and finish on the other workers.

    python examples/scheduler.py
"""

from __future__ import annotations

import logging
import os
import uuid
from collections import Counter
from contextlib import AsyncExitStack

import anyio
import pydantic

import aiocoord
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer, expire_session


class Order(pydantic.BaseModel):
    sku: str
    quantity: int = pydantic.Field(gt=0)
    unit_price: float


class Invoice(pydantic.BaseModel):
    sku: str
    total: float
    worker: str


def scheduler_for(coord: aiocoord.Coordinator, root: str, name: str) -> Scheduler:
    """The same jobs are registered in every process: clients validate, workers run."""
    sched = Scheduler(coord, root, strategy="least-loaded", result_ttl=60)

    @sched.job("invoice")
    async def invoice(order: Order) -> Invoice:
        await anyio.sleep(0.1)  # some work
        return Invoice(sku=order.sku, total=order.quantity * order.unit_price, worker=name)

    @sched.job("refund")
    async def refund(order_id: str, reason: str = "") -> None:
        raise PermissionError(f"refunds for {order_id} need a manager ({reason or 'no reason'})")

    return sched


async def main(hosts: str) -> None:
    root = f"/examples/scheduler-{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        coords, workers = [], []
        for name in ("alpha", "beta", "gamma"):
            coord = await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=5))
            sched = scheduler_for(coord, root, name)
            coords.append(coord)
            workers.append(await stack.enter_async_context(sched.worker(capacity=2)))
        client_coord = await stack.enter_async_context(aiocoord.connect(hosts))
        client = scheduler_for(client_coord, root, "client")

        with anyio.fail_after(30):
            orders = [Order(sku=f"sku-{i}", quantity=i + 1, unit_price=2.5) for i in range(30)]
            ids = [await client.submit("invoice", order) for order in orders]
            print(f"submitted {len(ids)} invoice jobs; first status: {await client.status(ids[0])}")

            print(f"expiring the session of {workers[1]!r}")
            await expire_session(coords[1])  # as if the process was killed

            invoices: list[Invoice] = [await client.result(job_id) for job_id in ids]
            assert [inv.total for inv in invoices] == [o.quantity * o.unit_price for o in orders]
            print("all invoices done; jobs per worker:", dict(Counter(i.worker for i in invoices)))

            again = await client.submit("invoice", orders[0], job_id=ids[0])  # idempotent
            print(f"resubmitting {again}: status {await client.status(again)}, not run again")

            try:
                await client.result(await client.submit("refund", {"order_id": "o-17"}))
            except aiocoord.JobFailed as exc:
                print(f"refund failed as expected: {exc.type}: {exc.message}")
            assigner = next((w for w in workers if w.is_assigner), None)
            print(f"assigner now: {assigner!r}")


def run() -> None:
    logging.basicConfig(level=logging.WARNING)
    hosts = os.environ.get("AIOCOORD_HOSTS")
    if hosts:
        anyio.run(main, hosts)
        return
    with ZooKeeperServer() as server:
        anyio.run(main, server.connect_string)


if __name__ == "__main__":
    run()
