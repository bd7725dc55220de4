"""Time travel with a real worker: a run's checkpoints listed and shown, forks that resume from
one with the state edited, the finished checkpoint forked, idempotent forks, `dlq replay --from`."""

from __future__ import annotations

import json
import uuid

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.errors import IdempotencyConflict
from reflexr_graph.model import CheckpointDetail, CheckpointInfo, RunInfo, Status
from reflexr_graph.store import keys
from tests.surfaces.conftest import Cli
from tests.surfaces.graphs import CHAIN_STEPS, bad_key, chain, count_key

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chain_published", "worker")]

TOTALS = {seq: sum(range(1, seq + 1)) for seq in range(1, 7)}
"""The state's total at checkpoint seq: t1..t<seq> ran."""


@pytest.fixture
def chain_published(redis_client: redis.Redis) -> None:
    schemas.publish(redis_client, [chain])


def counts(r: redis.Redis, key: str) -> dict[str, int]:
    return {step: int(r.get(count_key(key, step)) or 0) for step in CHAIN_STEPS}


def finished_run(client: Client, key: str) -> str:
    run_id = client.enqueue("chain", key)
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    return run_id


def snapshot(client: Client, run_id: str) -> tuple[RunInfo, list[CheckpointInfo], list[CheckpointDetail]]:
    listed = client.checkpoints(run_id)
    return client.get(run_id), listed, [client.checkpoint(run_id, c.seq) for c in listed]


def test_a_six_step_run_keeps_every_checkpoint_with_its_state(
    cli: Cli, client: Client, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    run_id = finished_run(client, key)
    listed = client.checkpoints(run_id)
    assert [(c.seq, c.next_node, c.attempt, c.finished) for c in listed] == [
        *((seq, f"t{seq + 1}", 1, False) for seq in range(1, 6)),
        (6, None, 1, True),
    ]
    for seq in range(1, 6):
        shown = client.checkpoint(run_id, seq)
        assert shown.state == {"total": TOTALS[seq], "visited": list(CHAIN_STEPS[:seq])}
        assert (shown.inputs, shown.next_inputs, shown.size) == (key, key, listed[seq - 1].size)
    assert client.checkpoint(run_id, 6).output == 21
    # The history expires with the run.
    assert 0 < redis_client.ttl(keys.ckpt(run_id)) <= client.settings.run_retention_s

    table = cli("checkpoints", run_id)
    assert table.returncode == 0, table.stderr
    assert all(f"t{seq + 1}" in table.stdout for seq in range(1, 6)) and "(finished)" in table.stdout
    as_json = json.loads(cli("checkpoints", run_id, "--json").stdout)
    assert [c["seq"] for c in as_json] == [1, 2, 3, 4, 5, 6]
    shown = cli("checkpoint", run_id, "3")
    assert shown.returncode == 0 and '"total": 6' in shown.stdout and "inputs of t4" in shown.stdout
    detail = json.loads(cli("checkpoint", run_id, "3", "--json").stdout)
    assert (detail["seq"], detail["next_node"], detail["state"]["total"]) == (3, "t4", 6)


def test_a_fork_with_an_edited_state_runs_only_the_steps_after_its_checkpoint(
    cli: Cli, client: Client, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    source = finished_run(client, key)
    before = snapshot(client, source)
    edited = '{"total": 100, "visited": ["edited"]}'
    forked = cli("fork", source, "--from", "3", "--state", edited, "--yes", "--json")
    assert forked.returncode == 0, forked.stderr
    fork_id = json.loads(forked.stdout)["run_id"]
    info = client.wait(fork_id, timeout=60)
    # 100 + t4 + t5 + t6: the output the edited state implies.
    assert (info.status, info.output, info.forked_from, info.forked_at_seq) == (
        Status.SUCCEEDED,
        115,
        source,
        3,
    )
    assert counts(redis_client, key) == {"t1": 1, "t2": 1, "t3": 1, "t4": 2, "t5": 2, "t6": 2}
    assert [(c.seq, c.attempt) for c in client.checkpoints(fork_id)] == [(3, 0), (4, 1), (5, 1), (6, 1)]
    assert client.checkpoint(fork_id, 5).state == {"total": 109, "visited": ["edited", "t4", "t5"]}
    assert snapshot(client, source) == before, "the source run is unchanged"

    status = cli("status", fork_id)
    assert "forked from" in status.stdout and f"{source} at checkpoint #3" in status.stdout
    history = cli("history", fork_id)
    assert "run_forked" in history.stdout and f"forked from {source}" in history.stdout
    assert "state replaced" in history.stdout


def test_a_fork_of_the_finished_checkpoint_has_the_output_at_once(
    client: Client, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    source = finished_run(client, key)
    fork_id = client.fork(source, from_seq=6)
    info = client.get(fork_id)
    assert (info.status, info.output, info.attempts) == (Status.SUCCEEDED, 21, 0)
    assert "attempt_started" not in [e.type for e in client.history(fork_id)]
    assert counts(redis_client, key) == dict.fromkeys(CHAIN_STEPS, 1)


def test_the_same_idempotency_key_gives_the_same_fork(client: Client, redis_client: redis.Redis) -> None:
    key = uuid.uuid4().hex
    source = finished_run(client, key)
    first = client.fork(source, from_seq=4, idempotency_key="fix-42")
    assert client.fork(source, from_seq=4, idempotency_key="fix-42") == first
    assert client.wait(first, timeout=60).output == 21
    assert counts(redis_client, key)["t5"] == 2, "one fork ran, once"
    with pytest.raises(IdempotencyConflict, match=first):
        client.fork(source, from_seq=4, state={"total": 1, "visited": []}, idempotency_key="fix-42")


def test_dlq_replay_from_an_earlier_checkpoint_backs_out_of_a_bad_step(
    cli: Cli, client: Client, redis_client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    redis_client.set(bad_key(key), 1)  # t4 goes wrong: the total it leaves makes t5 fail for good
    run_id = client.enqueue("chain", key)
    dead = client.wait(run_id, timeout=60)
    assert (dead.status, dead.reason, dead.next_node) == (Status.DEAD, "bad_total", "t5")
    assert [c.seq for c in client.checkpoints(run_id)] == [1, 2, 3, 4]

    redis_client.delete(bad_key(key))  # t4 is fixed
    replayed = cli("dlq", "replay", run_id, "--from", "3", "--yes")
    assert replayed.returncode == 0, replayed.stderr
    info = client.wait(run_id, timeout=60)
    assert (info.status, info.output) == (Status.SUCCEEDED, 21)
    assert counts(redis_client, key) == {"t1": 1, "t2": 1, "t3": 1, "t4": 2, "t5": 2, "t6": 1}
    assert [c.seq for c in client.checkpoints(run_id)] == [1, 2, 3, 4, 5, 6]
    assert client.checkpoint(run_id, 4).state["total"] == 10, "seq 4 is the fixed step's"
    assert "1 later checkpoint(s) dropped" in cli("history", run_id).stdout
