"""Issue 34: ``wait(until="waiting")`` returns as soon as a run waits for a person, on the Client,
the AsyncClient and ``status --wait --until waiting``, instead of blocking for its whole timeout."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.model import RunInfo, Status
from tests.surfaces.cli_runner import CliHere


def test_wait_until_waiting_returns_within_a_second_of_the_runs_wait(
    client: Client,
    redis_url: str,
    queue: str,
    cli_here: CliHere,
    start_worker: Callable[[], subprocess.Popen[bytes]],
) -> None:
    run_id = client.enqueue("approvals", "invoice")
    returned: list[tuple[RunInfo, float]] = []

    def wait() -> None:
        info = client.wait(run_id, timeout=90, until="waiting")
        returned.append((info, time.time()))

    waiter = threading.Thread(target=wait)
    waiter.start()  # blocks on the queued run until a worker takes it to its signal wait
    start_worker()
    waiter.join(timeout=100)
    assert returned, "wait(until='waiting') did not return"
    info, at = returned[0]
    assert (info.status, info.waiting_for) == (Status.WAITING, "approval")
    began = next(e.at for e in client.history(run_id) if e.type == "run_waiting")
    assert at - began < 1.0, f"returned {at - began:.2f}s after the run began to wait"

    async def wait_async() -> RunInfo:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            return await aclient.wait(run_id, timeout=5, until="waiting")

    assert asyncio.run(wait_async()).status is Status.WAITING
    shown = cli_here("status", run_id, "--wait", "--until", "waiting", "--timeout", "5")
    assert shown.returncode == 0, shown.stderr
    assert "waiting" in shown.stdout and "approval" in shown.stdout
    alone = cli_here("status", run_id, "--until", "waiting")
    assert alone.returncode == 2 and "give --wait too" in alone.stderr
