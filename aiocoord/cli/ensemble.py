"""``aiocoord zk ensemble``: the ensemble's members and what each one is doing now.

The members, their ids, roles (participant, observer), client and quorum
addresses and the config's version come from the ensemble's dynamic config
(``get_config``); each member's mode (leader, follower, observer, standalone,
or not answering) from its ``srvr`` four-letter word.  A server without a
dynamic config (standalone, or before ZooKeeper 3.5) is shown as the hosts
the command was given, with their modes.
"""

from __future__ import annotations

import argparse
import json

import anyio.to_thread

from ..server import server_mode
from ..settings import parse_hosts
from ._connect import connected, settings_of
from ._run import run_async

__all__ = ("run_ensemble",)


def run_ensemble(args: argparse.Namespace) -> int:
    """Print the members and their modes (``--json``: a JSON object); exit 0, or 1 if unreachable."""
    settings = settings_of(args)
    no_auth = f"no access to /zookeeper/config on {settings.hosts} with these credentials"

    async def run() -> dict[str, object]:
        async with connected(settings, args.timeout, no_auth=no_auth) as coord:
            config, _ = await coord.client.get_config()
        members: list[dict[str, object]] = []
        if config.servers:
            for server in config.servers:
                address = server.client_address
                members.append(
                    {
                        "id": server.id,
                        "role": server.role,
                        "client": f"{address[0]}:{address[1]}" if address else None,
                        "quorum": f"{server.host}:{server.peer_port}:{server.election_port}",
                    }
                )
        else:
            for host, port in parse_hosts(settings.hosts)[0]:
                members.append({"id": None, "role": None, "client": f"{host}:{port}"})
        for member in members:
            client = member["client"]
            member["mode"] = await _mode(client) if isinstance(client, str) else None
        return {"version": f"0x{config.version:x}" if config.servers else None, "members": members}

    info = run_async(run, args.loop)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print("\n".join(render(info)))
    return 0


async def _mode(client: str) -> str | None:
    host, port = parse_hosts(client)[0][0]
    return await anyio.to_thread.run_sync(server_mode, host, port)


def render(info: dict[str, object]) -> list[str]:
    """The table `run_ensemble` prints: a heading line, then one line per member."""
    members = info["members"]
    assert isinstance(members, list)
    version = info["version"]
    lines = [
        f"ensemble config version {version} ({len(members)} members)"
        if version
        else "no dynamic config (standalone, or reconfig not in use): the hosts given"
    ]
    rows = [("id", "role", "mode", "client", "quorum")]
    for m in members:
        rows.append(
            (
                str(m["id"] if m["id"] is not None else "-"),
                str(m["role"] or "-"),
                str(m["mode"] or "not answering"),
                str(m["client"] or "-"),
                str(m.get("quorum") or "-"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return lines
