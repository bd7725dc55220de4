"""CLI against a real worker subprocess: enqueue --wait, status, dlq show/replay/purge, cancel."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.surfaces.conftest import ROOT, Cli
from tests.surfaces.graphs import count_key, ok_key, release_key
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker")]


def counts(r: redis.Redis, key: str) -> dict[str, int]:
    return {step: int(r.get(count_key(key, step)) or 0) for step in ("s1", "s2", "s3")}


def test_enqueue_wait_and_status(cli: Cli, redis_client: redis.Redis) -> None:
    redis_client.set(ok_key("happy"), 1)
    result = cli(
        "enqueue", "counter", "--input", '{"key": "happy", "n": 5}', "--wait", "--timeout", "60", "--json"
    )
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert (info["status"], info["output"]) == ("succeeded", 6)
    status = cli("status", info["run_id"], "--json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["status"] == "succeeded"
    assert "succeeded" in cli("status", info["run_id"]).stdout
    assert counts(redis_client, "happy") == {"s1": 1, "s2": 1, "s3": 1}


def test_dead_run_replays_from_its_checkpoint(cli: Cli, client: Client, redis_client: redis.Redis) -> None:
    failed = cli(
        "enqueue", "counter", "--input", '{"key": "dlq", "n": 1}', "--wait", "--timeout", "60", "--json"
    )
    assert failed.returncode == 1, failed.stderr
    run_id = json.loads(failed.stdout)["run_id"]

    listed = cli("dlq", "list", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id]
    assert run_id in cli("dlq", "list", "--graph", "counter").stdout
    assert json.loads(cli("dlq", "list", "--reason", "nope", "--json").stdout) == []
    shown = cli("dlq", "show", run_id)
    assert shown.returncode == 0
    assert "flag_missing" in shown.stdout and "s2" in shown.stdout
    detail = json.loads(cli("dlq", "show", run_id, "--json").stdout)
    assert detail["checkpoint"]["next_node"] == "s2"
    assert detail["traceback"] and "RunFailure" in detail["traceback"]
    # Issue 34: the first frame shown whole is the user's step; celery's and ours are folded.
    first = next(line for line in shown.stdout.splitlines() if line.strip().startswith("File"))
    assert "tests/surfaces/graphs.py" in first, shown.stdout
    assert "framework frames (" in shown.stdout and "celery/app/trace.py" not in shown.stdout

    redis_client.set(ok_key("dlq"), 1)
    replayed = cli("dlq", "replay", run_id)
    assert replayed.returncode == 0, replayed.stderr
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert counts(redis_client, "dlq") == {"s1": 1, "s2": 2, "s3": 1}
    assert "run_replayed" in cli("history", run_id).stdout


def test_bulk_replay_and_purge(cli: Cli, client: Client) -> None:
    run_ids = [client.enqueue("counter", {"key": f"bulk{i}", "n": 1}) for i in range(3)]
    for run_id in run_ids:
        assert client.wait(run_id, timeout=60).status is Status.DEAD
    declined = cli("dlq", "replay", "--all", stdin="n\n")
    assert declined.returncode == 1
    assert len(client.dead_letters()) == 3
    replayed = cli("dlq", "replay", "--all", "--graph", "counter", "--yes")
    assert replayed.returncode == 0, replayed.stderr
    assert "replayed: 3 of 3" in replayed.stdout
    for run_id in run_ids:
        assert client.wait(run_id, timeout=60).status is Status.DEAD
    purged = cli("dlq", "purge", run_ids[0], "--yes")
    assert purged.returncode == 0, purged.stderr
    assert cli("status", run_ids[0]).returncode == 2
    purged = cli("dlq", "purge", "--all", "--yes")
    assert "purged: 2 of 2" in purged.stdout
    assert client.dead_letters() == []


def test_cancel_a_running_run(cli: Cli, client: Client, redis_client: redis.Redis) -> None:
    key = uuid.uuid4().hex
    run_id = client.enqueue("blocker", key)
    wait_for(lambda: client.get(run_id).status is Status.RUNNING, what="the run to start")
    result = cli("cancel", run_id, "--yes")
    assert result.returncode == 0, result.stderr
    assert "cancel requested" in result.stdout and "--now" in result.stdout
    assert client.get(run_id).cancel_requested
    redis_client.rpush(release_key(key), 1)
    assert client.wait(run_id, timeout=30).status is Status.CANCELLED
    assert cli("status", run_id, "--json").returncode == 0
    assert cli("cancel", run_id, "--yes").returncode == 1, "cancelling a finished run is refused"


def test_watch_follows_a_run_to_its_end(cli: Cli, client: Client, redis_client: redis.Redis) -> None:
    redis_client.set(ok_key("watched"), 1)
    run_id = client.enqueue("counter", {"key": "watched", "n": 1})
    result = cli("watch", run_id)
    assert result.returncode == 0, result.stderr
    assert "succeeded" in result.stdout


FOREIGN_PRODUCER = """
import sys
from celery import Celery
url, queue, run_id = sys.argv[1:4]
app = Celery(broker=url)
app.conf.task_serializer = "json"
app.send_task("reflexr_graph.run", kwargs={"graph": "counter", "inputs": {"key": "foreign", "n": 3}},
              task_id=run_id, queue=queue)
assert not any(m.startswith("reflexr_graph") for m in sys.modules), "imported reflexr_graph"
"""


def test_enqueue_from_a_process_that_imports_only_celery(
    client: Client, redis_client: redis.Redis, redis_url: str, queue: str
) -> None:
    redis_client.set(ok_key("foreign"), 1)
    run_id = str(uuid.uuid4())
    subprocess.run(
        [sys.executable, "-c", FOREIGN_PRODUCER, redis_url, queue, run_id], cwd=ROOT, check=True, timeout=60
    )
    wait_for(lambda: redis_client.exists(keys.run(run_id)), what="the worker to create the run")
    info = client.wait(run_id, timeout=60)
    assert (info.status, info.output) == (Status.SUCCEEDED, 4)
    assert client.get(run_id).graph == "counter"
