"""The fleet on RabbitMQ (``REFLEXR_BROKER_URL=amqp://...``), the store staying in Redis.

A real rabbitmq-server, started for the session on free ports in a temporary directory
(tests/rabbitmq_server.py), and real worker subprocesses. The crash tests are the Redis ones
(test_crash.py), run as they are against a fleet whose broker is RabbitMQ: the guarantees do not
depend on the broker. Skipped, saying why, only where the server cannot start.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import amqp
import pytest
import redis
from celery import Celery

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.dispatch import TASK_NAME, graph_queue
from reflexr_graph.model import Status
from reflexr_graph.store.quarantine import Quarantine
from tests.fleet import test_crash
from tests.fleet.conftest import Fleet, closing_fleet, executions
from tests.rabbitmq_server import RabbitMQServer, RabbitMQUnavailable
from tests.waiting import wait_for

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQServer]:
    server = RabbitMQServer()
    try:
        server.start()
    except RabbitMQUnavailable as exc:
        pytest.skip(f"RabbitMQ tests need a rabbitmq-server that starts here: {exc}")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def rabbit_fleet(
    redis_url: str, rabbitmq: RabbitMQServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Fleet]:
    f = Fleet(redis_url, tmp_path, queue=f"fleet-{uuid.uuid4().hex[:8]}")
    f.env["REFLEXR_BROKER_URL"] = rabbitmq.url
    with closing_fleet(f, request):
        yield f


def amqp_channel(server: RabbitMQServer) -> tuple[amqp.Connection, amqp.Channel]:
    """A plain AMQP channel. ``basic_publish`` on it returns once RabbitMQ confirms the message:
    without confirms, a publisher that closes its connection straight after publishing can lose
    messages on a quorum queue (seen on RabbitMQ 3.10: one of three published messages never
    arrived, under load)."""
    conn = amqp.Connection(f"127.0.0.1:{server.port}", userid="guest", password="guest", confirm_publish=True)
    conn.connect()
    return conn, conn.channel()


def queue_depth(server: RabbitMQServer, queue: str) -> tuple[int, int]:
    """(ready, consumers) of ``queue``, from a passive declare."""
    conn, channel = amqp_channel(server)
    try:
        _, ready, consumers = channel.queue_declare(queue, passive=True)
        return int(ready), int(consumers)
    finally:
        conn.close()


def is_quorum(server: RabbitMQServer, queue: str) -> bool:
    """True if ``queue`` exists as a quorum queue: declaring it classic is refused as inequivalent."""
    conn, channel = amqp_channel(server)
    try:
        channel.queue_declare(queue, durable=True, auto_delete=False, arguments={"x-queue-type": "classic"})
    except amqp.exceptions.PreconditionFailed:
        return True
    finally:
        with contextlib.suppress(OSError, amqp.exceptions.AMQPError):
            conn.close()
    return False


def test_runs_on_rabbitmq_with_quorum_queues_and_the_store_in_redis(
    rabbit_fleet: Fleet,
    rabbitmq: RabbitMQServer,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
) -> None:
    """The Client enqueues, a worker runs every step once; the base queue and the graph's queue are
    quorum queues; nothing of the broker is in Redis (no kombu list), the run's record is."""
    test_crash.test_happy_path(rabbit_fleet, client_for, redis_client)
    base, steps = rabbit_fleet.queue, graph_queue(rabbit_fleet.queue, "steps")
    assert is_quorum(rabbitmq, base) and is_quorum(rabbitmq, steps)
    assert queue_depth(rabbitmq, steps) == (0, 1), "the message was acked, and the worker consumes"
    assert not redis_client.exists(steps), "the broker's queue is not in Redis"


def test_async_client_and_a_foreign_producer_enqueue_through_rabbitmq(
    rabbit_fleet: Fleet, rabbitmq: RabbitMQServer, client_for: Callable[[Fleet], Client]
) -> None:
    """The AsyncClient publishes through Celery's producer (no LPUSH fast path off Redis), and a
    foreign Celery producer sends ``reflexr_graph.run`` to the base queue with quorum queues
    declared (its one RabbitMQ setting, docs/design.md): both runs succeed."""
    rabbit_fleet.start()
    settings = rabbit_fleet.settings()

    async def via_async_client() -> str:
        async with AsyncClient(settings) as client:
            return await client.enqueue("steps", {"value": 11})

    async_run = asyncio.run(via_async_client())
    foreign = Celery("foreign", broker=rabbitmq.url, set_as_current=False)
    foreign.conf.update(
        task_serializer="json",
        task_create_missing_queue_type="quorum",
        broker_transport_options={"confirm_publish": True},
    )
    foreign_run = f"foreign-{uuid.uuid4().hex[:8]}"
    kwargs = {"graph": "steps", "inputs": {"value": 12}}
    try:
        foreign.send_task(TASK_NAME, kwargs=kwargs, task_id=foreign_run, queue=rabbit_fleet.queue)
    finally:
        foreign.close()
    client = client_for(rabbit_fleet)
    for run_id, value in ((async_run, 11), (foreign_run, 12)):
        info = client.wait(run_id, timeout=30)
        assert (info.status, info.attempts) == (Status.SUCCEEDED, 1), info
        assert info.output is not None and info.output["value"] == value


def test_a_message_that_is_not_a_task_is_quarantined_and_the_worker_serves_on(
    rabbit_fleet: Fleet,
    rabbitmq: RabbitMQServer,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
) -> None:
    """Garbage published straight to a fleet queue (a body that is not JSON, a JSON task-less
    message, a pickle): each lands in the store's quarantine list and is acked, so RabbitMQ holds
    nothing that could be redelivered in a loop; the same worker process then runs a run."""
    worker = rabbit_fleet.start()
    steps = graph_queue(rabbit_fleet.queue, "steps")
    bad = [
        (b"\xff not json {", "application/json"),
        (b'{"just": "data"}', "application/json"),
        (b"\x80\x04K\x01.", "application/x-python-serialize"),
    ]
    conn, channel = amqp_channel(rabbitmq)
    try:
        for body, content_type in bad:
            channel.basic_publish(
                amqp.Message(body, content_type=content_type), exchange="", routing_key=steps
            )
    finally:
        conn.close()
    quarantine = Quarantine(redis_client)
    wait_for(
        lambda: quarantine.length() >= len(bad),
        30,
        "the three messages in the quarantine list",
        explain=lambda: f"(ready, consumers) of {steps!r}: {queue_depth(rabbitmq, steps)}",
    )
    reasons = sorted(e.reason for e in quarantine.items())
    assert reasons == ["content_not_allowed", "not_a_task", "undecodable_body"], reasons
    client = client_for(rabbit_fleet)
    run_id = client.enqueue("steps", {"value": 13})
    assert client.wait(run_id, timeout=30).status is Status.SUCCEEDED
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s3:1"]
    assert worker.alive()
    assert queue_depth(rabbitmq, steps) == (0, 1), "nothing left to redeliver"


@pytest.mark.parametrize(
    "broker", ["amqp://guest:wrong-pw-4417@127.0.0.1:{port}//", "amqp://guest:guest@127.0.0.1:{port}/nope"]
)
def test_a_broker_url_rabbitmq_refuses_stops_the_worker_saying_what_to_fix(
    broker: str, rabbit_fleet: Fleet, rabbitmq: RabbitMQServer
) -> None:
    """A wrong password or a missing vhost can never work: the worker exits 1 with one line naming
    REFLEXR_BROKER_URL, never the password, instead of retrying forever."""
    worker = rabbit_fleet.start(wait=False, REFLEXR_BROKER_URL=broker.format(port=rabbitmq.port))
    assert worker.wait_exit(60) == 1
    log = worker.log()
    assert "refused the worker" in log and "fix REFLEXR_BROKER_URL" in log
    assert "wrong-pw-4417" not in log


# -- the crash tests of test_crash.py, on RabbitMQ ----------------------------------------------


@pytest.mark.slow
def test_sigkill_of_pool_child_on_rabbitmq(
    rabbit_fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    test_crash.test_sigkill_of_pool_child_mid_step_resumes_from_checkpoint(
        rabbit_fleet, client_for, redis_client
    )


@pytest.mark.slow
def test_sigkill_of_whole_worker_on_rabbitmq(
    rabbit_fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    test_crash.test_sigkill_of_whole_worker_resumes_on_another_within_a_lease_ttl(
        rabbit_fleet, client_for, redis_client
    )


@pytest.mark.slow
def test_sigterm_on_rabbitmq(
    rabbit_fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    test_crash.test_sigterm_mid_step_requeues_and_resumes_elsewhere(rabbit_fleet, client_for, redis_client)


@pytest.mark.slow
def test_poison_run_on_rabbitmq(
    rabbit_fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    test_crash.test_step_that_kills_its_worker_every_time_is_dead_lettered(
        rabbit_fleet, client_for, redis_client
    )
