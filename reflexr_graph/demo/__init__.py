"""``reflexr-graph demo`` (``make run``): the real system on an embedded default, in well under a minute.

It starts a private Redis (AOF on, data under .run/) unless REFLEXR_REDIS_URL names one,
starts two worker processes, and enqueues a batch of document-triage runs. Then it
SIGKILLs the worker that holds one run in the middle of a step and shows that run
resume on the other worker from its checkpoint, lets a poison run be dead-lettered,
"fixes" it and replays it through the real CLI, shows a run waiting for an on-call
engineer's approval while holding no worker and wakes it with the real CLI's ``signal``,
and ends with a summary and its legend.
Every process it started is stopped, whatever happens; with ``keep``, all but the private
Redis, which it leaves running for ``reflexr-graph runs``, ``history`` and the like.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live

from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.demo.afterwards import Target, tell
from reflexr_graph.demo.legend import legend
from reflexr_graph.demo.phases import (
    Demo,
    DemoFailed,
    approve_on_call,
    crash_one,
    poison_and_replay,
    say,
    wait_for_on_call,
)
from reflexr_graph.demo.processes import RUN_DIR, Fleet, check_example, private_redis, worker_env
from reflexr_graph.demo.scenario import RunSpec, batch
from reflexr_graph.demo.view import summary
from reflexr_graph.errors import UnknownGraph
from reflexr_graph.model import TERMINAL, Status
from reflexr_graph.store.records import saved_next_nodes

__all__ = ["DemoFailed", "run_demo"]

QUEUE = "reflexr-demo"
WORKER_SETTINGS = {
    # The bundled example is loaded only where asked for, as a user's graph would be.
    "REFLEXR_GRAPHS": "workers.examples.triage:triage",
    "REFLEXR_QUEUE": QUEUE,
    "REFLEXR_LEASE_TTL_S": "3",
    "REFLEXR_MAX_ATTEMPTS": "3",
    "REFLEXR_RETRY_BACKOFF_S": "0.5",
    "REFLEXR_RETRY_BACKOFF_MAX_S": "2",
    "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S": "5",
}


def _wait_for_graph(client: Client, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.graph(name)
            return
        except UnknownGraph:
            if time.monotonic() > deadline:
                raise DemoFailed(f"no worker published the {name!r} graph within {timeout:.0f}s") from None
            time.sleep(0.2)


@contextlib.contextmanager
def _redis(keep: bool) -> Iterator[Target]:
    url = os.environ.get("REFLEXR_REDIS_URL")
    if url:
        yield Target(url, private=False)
        return
    with private_redis(keep=keep) as server:
        yield Target(server.url, private=True, kept_pid=server.pid if keep else None)


def run_demo(console: Console | None = None, *, keep: bool = False, serve_port: int | None = None) -> int:
    """Run the showcase; 0 when every run succeeded, 1 otherwise. ``keep`` leaves a private Redis running;
    with ``serve_port``, the console serves the demo's runs on that port, with its workers, until Ctrl-C."""
    console = console or Console()
    check_example()
    RUN_DIR.mkdir(exist_ok=True)
    specs = batch()
    with _redis(keep) as target:
        try:
            code = _with_fleet(console, target.url, specs, serve_port)
        finally:
            # After a failure too: a kept Redis is how to look at what went wrong.
            tell(console, target, specs)
    return code


def _with_fleet(console: Console, url: str, specs: list[RunSpec], serve_port: int | None) -> int:
    fleet = Fleet(worker_env(url, WORKER_SETTINGS))
    try:
        code = _showcase(console, fleet, url, specs)
        if serve_port is not None:
            _serve(console, url, serve_port)
        return code
    finally:
        say(console, "stopping the workers (SIGTERM, soft shutdown)")
        fleet.stop()


def _serve(console: Console, url: str, port: int) -> None:
    """The console on the demo's Redis, its two workers still running, until Ctrl-C."""
    from reflexr_graph.api.serve import serve

    say(console, "serving the console on the demo's runs; the workers keep running (Ctrl-C stops it all)")
    # uvicorn hands Ctrl-C back once it has shut down; here it is the asked-for end, not a failure.
    with contextlib.suppress(KeyboardInterrupt):
        serve(load_settings(redis_url=url, queue=QUEUE), host="127.0.0.1", port=port)


def _showcase(console: Console, fleet: Fleet, url: str, specs: list[RunSpec]) -> int:
    from workers.examples.triage import FIXED_KEY

    say(console, f"Redis at {url.split('@')[-1]}; starting two workers (logs in {RUN_DIR}/)")
    for name in ("demo-a", "demo-b"):
        fleet.start_worker(name)
    max_attempts = int(WORKER_SETTINGS["REFLEXR_MAX_ATTEMPTS"])
    client = Client(load_settings(redis_url=url, queue=QUEUE, max_attempts=max_attempts))
    _wait_for_graph(client, "triage")
    client.store.client.delete(FIXED_KEY)
    page = next(s for s in specs if s.role == "approval")
    page.run_id = client.enqueue("triage", page.inputs)
    with Live(console=console, refresh_per_second=8, transient=True) as live:
        # The run that waits for a person goes first, so it is waiting before anything else happens.
        demo = Demo(client, fleet, [], live, batch=specs)
        wait_for_on_call(demo, console)
        for spec in specs:
            if not spec.run_id:
                spec.run_id = client.enqueue("triage", spec.inputs)
                demo.specs.append(spec)
        say(console, f"enqueued {len(specs) - 1} more document-triage runs")
        crash_one(demo, console)
        poison_and_replay(demo, console, url, QUEUE)
        approve_on_call(demo, console, url, QUEUE)
        demo.wait("finishing the batch", lambda i: all(x.status in TERMINAL for x in i.values()))
    infos = demo.infos()
    done = {s.run_id: demo.executions(s.run_id) for s in specs}
    saved = saved_next_nodes(client.store.events(specs[0].run_id))
    console.print(summary(specs, infos, done))
    console.print(legend(specs, infos, done, saved))
    ok = all(info.status is Status.SUCCEEDED for info in infos.values())
    say(console, "every run succeeded" if ok else "some runs did not succeed: see the table above")
    return 0 if ok else 1
