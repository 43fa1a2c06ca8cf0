"""A delay relay: what `NetworkLab` uses to slow a node's TCP links where the kernel has no netem.

Runs inside one node's namespace (``python _relay.py --port P --mark M
--control FILE``; standard library only, so it starts fast and imports
nothing of the package).  The lab redirects every TCP connection the node
opens to the lab's subnet to ``127.0.0.1:P`` (an nftables ``redirect`` in the
node's namespace, which skips packets carrying mark ``M``); the relay finds
where the connection was going (``SO_ORIGINAL_DST``), opens it itself with
mark ``M`` from the node's own address, and copies both directions.  Each
chunk read is delivered ``delay ± jitter`` seconds later (uniform), never
before the chunk ahead of it: a stream keeps its order, as TCP does over a
netem link that reorders packets.  The connecting program sees the real
peer address (the redirect is undone on its replies); a connection the
relay cannot open upstream is reset.

``FILE`` holds ``DELAY JITTER`` in seconds and, optionally, a generation
word (replaced atomically by the lab); the relay reads it again whenever it
is replaced, checking every 50 ms, and the new setting applies to chunks
read from then on.  Once it has taken a setting it writes the generation to
``FILE.applied`` (atomically), so that the lab can wait for it: a loaded
machine may run the relay's poll long after the file changed.  Loss
is not done here: the lab drops packets of the node's real link (nftables),
and TCP retransmits them, as it would on a lossy network.

Prints ``listening`` on stdout once it accepts connections; runs until
killed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import socket
import struct
import sys
import time

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
CHUNK = 65536
POLL = 0.05
CONNECT_TIMEOUT = 10.0  # an upstream connect that hangs (a cut link) is given up


class Settings:
    """The delay and jitter now in force, re-read from the control file when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.delay = 0.0
        self.jitter = 0.0
        self._seen = ""
        self.reload()

    def reload(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()  # a few bytes, replaced by a rename: read whole every poll
            if text == self._seen:
                return
            words = text.split()
            delay, jitter = float(words[0]), float(words[1])
        except (OSError, ValueError, IndexError):
            return
        self._seen = text
        self.delay, self.jitter = max(0.0, delay), max(0.0, jitter)
        if len(words) > 2:
            applied = f"{self.path}.applied"
            with contextlib.suppress(OSError):
                with open(f"{applied}.tmp", "w", encoding="utf-8") as f:
                    f.write(words[2] + "\n")
                os.replace(f"{applied}.tmp", applied)

    def lateness(self, rng: random.Random) -> float:
        if not self.delay and not self.jitter:
            return 0.0
        return max(0.0, self.delay + rng.uniform(-self.jitter, self.jitter))

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(POLL)
            self.reload()


async def pump(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    settings: Settings,
    rng: random.Random,
) -> None:
    """Copy one direction, each chunk held back by the current delay, in order; then EOF."""
    queue: collections.deque[tuple[float, bytes]] = collections.deque()
    arrived = asyncio.Event()
    done = False

    async def deliver() -> None:
        while True:
            while not queue:
                if done:
                    return
                arrived.clear()
                await arrived.wait()
            due, data = queue.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    delivering = asyncio.ensure_future(deliver())
    last = 0.0
    try:
        while True:
            try:
                data = await reader.read(CHUNK)
            except OSError:
                data = b""
            if not data:
                break
            last = max(last, time.monotonic() + settings.lateness(rng))
            queue.append((last, data))
            arrived.set()
        done = True
        arrived.set()
        await delivering
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()
    finally:
        delivering.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await delivering


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(address), port


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a RST, as a refused or failed connection would look."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    *,
    settings: Settings,
    mark: int,
    rng: random.Random,
) -> None:
    loop = asyncio.get_running_loop()
    try:
        target = original_destination(client_writer.get_extra_info("socket"))
        up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        up.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        up.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(up, target), CONNECT_TIMEOUT)
        except BaseException:
            up.close()
            raise
        up_reader, up_writer = await asyncio.open_connection(sock=up)
    except (OSError, TimeoutError):
        reset(client_writer)
        return
    try:
        await asyncio.gather(
            pump(client_reader, up_writer, settings, rng),
            pump(up_reader, client_writer, settings, rng),
        )
    except OSError:
        pass
    finally:
        for w in (client_writer, up_writer):
            w.transport.abort()


async def serve(port: int, mark: int, control: str) -> None:
    settings = Settings(control)
    rng = random.Random()
    connections: set[asyncio.Task[None]] = set()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await relay(reader, writer, settings=settings, mark=mark, rng=rng)
        finally:
            connections.discard(task)

    server = await asyncio.start_server(accepted, "127.0.0.1", port, reuse_address=True)
    async with server:
        print("listening", flush=True)
        await settings.watch()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="NetworkLab's userspace delay relay")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mark", type=int, required=True)
    parser.add_argument("--control", required=True)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.port, args.mark, args.control))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
