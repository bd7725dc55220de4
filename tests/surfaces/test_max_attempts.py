"""Issue 25: a run's max_attempts follows one rule, whoever creates its record.

The action's own max_attempts, else REFLEXR_MAX_ATTEMPTS of the process that publishes the graph
(schemas.run_max_attempts); it is published in the graph's entry, and a Client's enqueue and a
worker taking a foreign ``send_task`` message both take it from there. The producer's own setting
used to decide for the Client's runs, and the worker's for foreign ones.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import redis
from celery import Celery

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.settings import Settings, load_settings
from tests.surfaces.conftest import Cli
from tests.surfaces.graphs import ACTIONS, release_key
from tests.waiting import wait_for

WORKERS_MAX_ATTEMPTS = 4
PRODUCERS_MAX_ATTEMPTS = 2


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """The workers (and the CLI) run with their own REFLEXR_MAX_ATTEMPTS."""
    return {**env, "REFLEXR_MAX_ATTEMPTS": str(WORKERS_MAX_ATTEMPTS)}


def _send_task(redis_url: str, queue: str, graph: str, inputs: object) -> str:
    """What a producer in another process sends, with Celery alone."""
    run_id = str(uuid.uuid4())
    app = Celery(broker=redis_url, set_as_current=False)
    app.conf.task_serializer = "json"
    try:
        app.send_task(
            "reflexr_graph.run", kwargs={"graph": graph, "inputs": inputs}, task_id=run_id, queue=queue
        )
    finally:
        app.close()
    return run_id


def test_a_client_run_and_a_foreign_message_get_the_budget_the_workers_publish(
    redis_url: str, queue: str, redis_client: redis.Redis, worker: subprocess.Popen[bytes]
) -> None:
    """``blocker`` sets no max_attempts: both runs get the workers' REFLEXR_MAX_ATTEMPTS, not the
    producer's."""
    wait_for(
        lambda: schemas.load(redis_client, "blocker").max_attempts == WORKERS_MAX_ATTEMPTS,
        what="the worker to publish blocker with its REFLEXR_MAX_ATTEMPTS",
    )
    assert schemas.load(redis_client, "counter").max_attempts == 1, "the action's own budget wins"
    for key in ("mine", "foreign"):
        redis_client.rpush(release_key(key), 1)  # the step returns at once
    settings = load_settings(redis_url=redis_url, queue=queue, max_attempts=PRODUCERS_MAX_ATTEMPTS)
    with Client(settings) as client:
        mine = client.enqueue("blocker", "mine")
        foreign = _send_task(redis_url, queue, "blocker", "foreign")
        budgets = {client.wait(run_id, timeout=60).max_attempts for run_id in (mine, foreign)}
    assert budgets == {WORKERS_MAX_ATTEMPTS}


def test_the_publishers_setting_is_published_and_a_producers_plays_no_part(
    redis_url: str, queue: str, redis_client: redis.Redis
) -> None:
    assert schemas.publish(redis_client, ACTIONS, WORKERS_MAX_ATTEMPTS) == ["counter", "blocker", "approvals"]
    settings = load_settings(redis_url=redis_url, queue=queue, max_attempts=PRODUCERS_MAX_ATTEMPTS)
    with Client(settings) as client:
        assert client.get(client.enqueue("blocker", "x")).max_attempts == WORKERS_MAX_ATTEMPTS
        assert client.get(client.enqueue("counter", {"key": "c", "n": 1})).max_attempts == 1
    assert schemas.publish(redis_client, ACTIONS, WORKERS_MAX_ATTEMPTS + 1) == ["blocker", "approvals"]


def test_an_entry_published_without_a_number_reads_as_the_default(redis_client: redis.Redis) -> None:
    """Entries written before the number was always published said null."""
    schemas.publish(redis_client, ACTIONS)
    entry = json.loads(redis_client.hget(schemas.GRAPHS, "blocker") or "{}")
    redis_client.hset(schemas.GRAPHS, "blocker", json.dumps({**entry, "max_attempts": None}))
    default = Settings.model_fields["max_attempts"].default
    assert schemas.load(redis_client, "blocker").max_attempts == default == 5


def test_graphs_shows_the_number_each_run_gets(cli: Cli, published: None) -> None:
    """It said "default" for a graph whose action sets none; the number is what its runs get."""
    listed = cli("graphs")
    assert listed.returncode == 0, listed.stderr
    assert "default" not in listed.stdout
    cells = {
        cells[0]: cells
        for line in listed.stdout.splitlines()
        if (cells := [c.strip() for c in line.strip("│ ").split("│")])[0] in ("blocker", "counter")
    }
    assert "5" in cells["blocker"] and "1" in cells["counter"], listed.stdout
    as_json = json.loads(cli("graphs", "--json").stdout)
    assert {g["name"]: g["max_attempts"] for g in as_json} == {"approvals": 5, "blocker": 5, "counter": 1}


def test_publish_from_a_deploy_step_publishes_with_its_own_setting(
    cli: Cli, redis_client: redis.Redis
) -> None:
    """`reflexr-graph publish` is the publisher then: its REFLEXR_MAX_ATTEMPTS is the budget it writes."""
    published = cli("publish", "tests.surfaces.graphs:blocker", "tests.surfaces.graphs:counter")
    assert published.returncode == 0, published.stderr
    assert schemas.load(redis_client, "blocker").max_attempts == WORKERS_MAX_ATTEMPTS
    assert schemas.load(redis_client, "counter").max_attempts == 1
