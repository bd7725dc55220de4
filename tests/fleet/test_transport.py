"""The fleet's transport in this process, on a real Redis: what the envelope check finds in each kind
of garbage, a channel that moves a bad item aside as it pops it (and counts it), and TLS that still
verifies certificates."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection
from kombu.exceptions import OperationalError

from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.settings import Settings
from reflexr_graph.fleet.envelope import envelope_problem
from reflexr_graph.fleet.transport import ScreenedRedis, Transport
from reflexr_graph.store.quarantine import Quarantine
from tests import otel
from tests.fleet import garbage
from tests.redis_server import RedisFactory
from tests.tls import tls_redis

pytestmark = pytest.mark.timeout(60)

DECIDED_BY_CELERY = {"unknown_task"}
"""Kinds whose envelope is sound: Celery's consumer finds what is wrong (fleet/consumer.py)."""


@pytest.fixture
def channel(redis_url: str) -> Iterator[Any]:
    with Connection(redis_url, transport=Transport) as conn:
        yield conn.default_channel


@pytest.mark.parametrize("kind", garbage.KINDS, ids=[k.name for k in garbage.KINDS])
def test_the_envelope_check_names_each_kind_of_garbage(channel: Any, kind: garbage.Kind) -> None:
    for i in range(len(garbage.KINDS)):
        item = kind.make("q", i)
        problem = envelope_problem(item, codecs=channel.codecs, decode_body=channel.decode_body)
        if kind.reason in DECIDED_BY_CELERY or (kind.reason == "undecodable_body" and i % 2 == 0):
            assert problem is None, "a sound envelope: Celery decodes its body and looks its task up"
        else:
            assert problem is not None and problem.reason.value == kind.reason, (i, problem)
            assert "x" * 20 not in problem.detail and "just a json" not in problem.detail, "no item values"


def test_a_valid_envelope_passes(channel: Any) -> None:
    assert envelope_problem(garbage.good("q"), codecs=channel.codecs, decode_body=channel.decode_body) is None


def test_a_channel_moves_a_bad_item_aside_as_it_pops_it_and_counts_it(
    channel: Any, redis_client: redis.Redis
) -> None:
    """kombu's synchronous get (RPOP) finds "nothing" where the bad item was; the next item is read."""
    assert isinstance(channel.client, ScreenedRedis)
    queue = f"q-{uuid.uuid4().hex[:6]}"
    before = otel.metric_total("reflexr.queue.quarantined", reflexr__reason="not_json")
    redis_client.lpush(queue, b"not json", garbage.good(queue, value=7))  # RPOP takes "not json" first
    assert channel.basic_get(queue) is None
    message = channel.basic_get(queue)
    assert message is not None and json.loads(message.body)[1]["inputs"] == {"value": 7}
    [item] = Quarantine(redis_client).items()
    assert (item.queue, item.reason, item.raw, item.size) == (queue, "not_json", "not json", 8)
    assert otel.metric_total("reflexr.queue.quarantined", reflexr__reason="not_json") - before == 1


@pytest.mark.slow
def test_rediss_through_the_fleet_transport_still_verifies_certificates(
    private_redis: RedisFactory, tmp_path: Path
) -> None:
    """Without options the server's certificate must verify against the system CAs (it does not, it is
    self-signed); with the URL's ssl_ca_certs, with or without ssl_cert_reqs, it verifies and connects."""
    _server, port, cert = tls_redis(private_redis, tmp_path, "pw")
    base = f"rediss://:pw@127.0.0.1:{port}/0"
    for url, connects in [
        (base, False),
        (f"{base}?ssl_ca_certs={cert}", True),
        (f"{base}?ssl_cert_reqs=required&ssl_ca_certs={cert}", True),
    ]:
        conf = celery_config(Settings(redis_url=url))
        conn = Connection(url, transport=conf["broker_transport"], ssl=conf["broker_use_ssl"])
        with conn:
            if connects:
                assert conn.default_channel.client.ping()
                ssl_options = conn.default_channel.pool.connection_kwargs
                assert ssl_options["ssl_ca_certs"] == str(cert)
            else:
                with pytest.raises(OperationalError, match="certificate verify failed"):
                    _ = conn.default_channel


def test_a_run_only_message_keeps_no_unacked_bookkeeping_and_a_foreign_one_keeps_kombus(
    channel: Any, redis_client: redis.Redis
) -> None:
    """Issue 18: the message of a recorded run (its graph only) costs the broker no unacked writes
    (its run's due entry or lease sends it again if its worker dies, reschedule_due.lua and
    reap.lua), and a requeue still puts it back, from memory; a foreign producer's message, with
    its inputs, keeps kombu's bookkeeping."""
    queue = f"q-{uuid.uuid4().hex[:6]}"
    unacked, index = channel.unacked_key, channel.unacked_index_key
    # Declared as Celery declares a queue a producer names, so a requeue finds its way back.
    channel.exchange_declare(queue, "direct", durable=True)
    channel.queue_declare(queue, durable=True)
    channel.queue_bind(queue, queue, queue)
    redis_client.lpush(queue, json.dumps(garbage.envelope(queue, {"graph": "steps"})).encode())
    redis_client.lpush(queue, garbage.good(queue, value=7))  # RPOP takes the run-only one first
    run_only = channel.basic_get(queue)
    assert json.loads(run_only.body)[1] == {"graph": "steps"}
    assert (redis_client.hlen(unacked), redis_client.zcard(index)) == (0, 0)
    foreign = channel.basic_get(queue)
    assert (redis_client.hlen(unacked), redis_client.zcard(index)) == (1, 1)
    run_only.requeue()
    foreign.requeue()
    assert (redis_client.hlen(unacked), redis_client.zcard(index)) == (0, 0)
    back = [channel.basic_get(queue), channel.basic_get(queue)]
    assert sorted(json.dumps(json.loads(m.body)[1]) for m in back) == sorted(
        [json.dumps({"graph": "steps"}), json.dumps({"graph": "steps", "inputs": {"value": 7}})]
    ), "both came back"
    for m in back:
        m.ack()
    assert (redis_client.hlen(unacked), redis_client.zcard(index)) == (0, 0)
