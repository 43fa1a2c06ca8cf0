"""A threaded WSGI app on aiocoord: jobs and a lock from request threads, standard library only.

The kind of program Flask or Django runs: one request per thread, no event
loop in sight.  ``aiocoord.blocking`` runs the session (and every recipe) in
one event loop of its own, in a background thread; the request threads call
it and block.  The app has two routes:

- ``POST /jobs/sum?a=..&b=..`` submits a job to the scheduler at
  /examples/web-jobs and answers 202 with its id; ``GET /jobs/<id>`` waits
  (at most ``wait`` seconds) for the result.  A worker of this same process
  runs the jobs (a plain function, run in a worker thread).
- ``POST /ledger`` appends a line to a shared ledger under the mutex at
  /examples/web-ledger-lock, passing the fencing token along and checking
  ``held.check()`` before the write: a request that lost the lock writes
  nothing.

It then plays its own client: eight threads hit ``/ledger`` at once, and
one submits jobs and waits for their results.

    python examples/threaded_web.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import aiocoord
from aiocoord import blocking
from aiocoord.cli import local_zookeeper

LOCK = "/examples/web-ledger-lock"
LEDGER = "/examples/web-ledger"
JOBS = "/examples/web-jobs"

StartResponse = Callable[[str, list[tuple[str, str]]], object]


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # one thread per request, as a threaded app server runs them


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log on stderr


def make_app(coord: blocking.BlockingCoordinator, sched: blocking.BlockingScheduler) -> Any:
    ledger_lock = coord.mutex(LOCK, participant_id="web", timeout=10.0)
    client = coord.coordinator.client

    def append_line() -> dict[str, Any]:
        with ledger_lock as held:
            node = coord.run(client.get, LEDGER)
            line = f"{threading.current_thread().name} token=0x{held.token:x}\n".encode()
            held.check()  # still ours? (LockLost if not: the request fails, nothing is written)
            coord.run(client.set, LEDGER, node.data + line, node.stat.version)
            return {"token": held.token}

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        status, body = "404 Not Found", {"error": "no such route"}
        try:
            if method == "POST" and path == "/ledger":
                status, body = "200 OK", append_line()
            elif method == "POST" and path == "/jobs/sum":
                job_id = sched.submit("sum", {"a": query.get("a"), "b": query.get("b")})
                status, body = "202 Accepted", {"job_id": job_id}
            elif method == "GET" and path.startswith("/jobs/"):
                wait = float(query.get("wait", "10"))
                result = sched.result(path.removeprefix("/jobs/"), timeout=wait)
                status, body = "200 OK", {"result": result}
        except ValueError as exc:  # a payload that does not fit the job's hints
            status, body = "422 Unprocessable Entity", {"error": str(exc).splitlines()[0]}
        except TimeoutError:
            status, body = "504 Gateway Timeout", {"error": "not done yet"}
        except aiocoord.LockLost as exc:
            status, body = "503 Service Unavailable", {"error": str(exc)}
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    return app


def request(base: str, method: str, path: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def main(settings: aiocoord.Settings) -> None:
    with blocking.connect(settings) as coord:
        client = coord.coordinator.client
        try:
            coord.run(client.create, LEDGER, b"", make_parents=True)
        except aiocoord.NodeExistsError:
            coord.run(client.set, LEDGER, b"")
        sched = coord.scheduler(JOBS)

        @sched.job("sum")
        def add(a: int, b: int) -> int:  # a plain function: a worker thread runs it
            return a + b

        server = make_server(
            "127.0.0.1", 0, make_app(coord, sched), ThreadingWSGIServer, QuietHandler
        )
        serving = threading.Thread(target=server.serve_forever, name="wsgi")
        serving.start()
        base = f"http://127.0.0.1:{server.server_port}"
        try:
            with sched.worker(capacity=4):
                status, body = request(base, "POST", "/jobs/sum?a=1&b=2")
                print(f"POST /jobs/sum: {status}")
                status, body = request(base, "GET", f"/jobs/{body['job_id']}?wait=20")
                print(f"GET /jobs/<id>: {status} {body}")
                status, body = request(base, "POST", "/jobs/sum?a=one&b=2")
                print(f"POST /jobs/sum with a bad payload: {status}")
                with ThreadPoolExecutor(8) as pool:
                    answers = list(pool.map(lambda _: request(base, "POST", "/ledger"), range(8)))
            ledger = coord.run(client.get, LEDGER).data.decode().splitlines()
            # Each append checked the ledger's version: two holders at once would have failed one.
            tokens = [int(line.rpartition("token=")[2], 16) for line in ledger]
            print(f"POST /ledger x8: {sorted({status for status, _ in answers})}")
            print(
                f"{len(ledger)} appends, one holder at a time; "
                f"tokens increase down the ledger: {tokens == sorted(tokens)}"
            )
        finally:
            server.shutdown()
            serving.join()
            server.server_close()


if __name__ == "__main__":
    with local_zookeeper() as settings:
        main(settings)
