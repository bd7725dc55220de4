"""Time travel refused before anything is written: an invalid state, an unknown seq or run, a
checkpoint of a changed graph. The source runs are real attempts of the ``chain`` graph, driven
in this process against the real Redis (no worker is needed to refuse a fork)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.errors import InvalidInputs, StaleCheckpoint
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.core.harness import Harness
from tests.surfaces.cli_runner import CliHere
from tests.surfaces.conftest import Cli
from tests.surfaces.graphs import _chain, bad_key, chain
from tests.surfaces.test_client import queued

SECRET = "hunter2-private-value"


@pytest.fixture
def harness(
    client: Client, redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> Harness:
    """Attempts of ``chain`` in this process; its steps reach Redis through REFLEXR_REDIS_URL."""
    monkeypatch.setenv("REFLEXR_REDIS_URL", redis_url)
    schemas.publish(redis_client, [chain])
    return Harness(client.store, [0.0])


@pytest.fixture
def source(harness: Harness) -> str:
    """A finished run of ``chain``: checkpoints 1 to 5 before t2..t6, and 6, the finished one."""
    run_id = harness.create(chain, uuid.uuid4().hex)
    assert harness.attempt(chain, run_id) == 21
    return run_id


def _written(client: Client, r: redis.Redis, queue: str, run_id: str) -> tuple[object, ...]:
    """Everything a refused fork or replay must leave as it was: runs, messages, the source run."""
    listed = client.checkpoints(run_id)
    return queued(r, queue), client.get(run_id), listed, [client.checkpoint(run_id, c.seq) for c in listed]


def test_bad_forks_exit_2_or_1_with_one_clear_line_and_write_nothing(
    cli: Cli, client: Client, redis_client: redis.Redis, queue: str, source: str
) -> None:
    before = _written(client, redis_client, queue, source)
    invalid = cli("fork", source, "--from", "3", "--state", f'{{"total": "{SECRET}", "visited": 3}}', "--yes")
    assert invalid.returncode == 2, invalid.stderr
    assert "state.total: must be of type integer" in invalid.stderr and "state.visited" in invalid.stderr
    assert SECRET not in invalid.stderr + invalid.stdout
    listed = json.loads(
        cli("fork", source, "--from", "3", "--state", '{"total": "x"}', "--yes", "--json").stderr
    )["error"]["errors"]
    assert [e["loc"] for e in listed] == [["state", "total"]]
    assert cli("fork", source, "--from", "3", "--state", "{not json", "--yes").returncode == 2
    finished = cli("fork", source, "--from", "6", "--state", "{}", "--yes")
    assert finished.returncode == 2 and "cannot be replaced in the finished checkpoint" in finished.stderr

    unknown_seq = cli("fork", source, "--from", "42", "--yes")
    assert unknown_seq.returncode == 2
    assert f"run {source} has no checkpoint #42 (it keeps 6, #1 to #6)" in unknown_seq.stderr
    unknown_run = cli("fork", "no-such-run", "--from", "1", "--yes")
    assert unknown_run.returncode == 2 and "no run no-such-run" in unknown_run.stderr
    declined = cli("fork", source, "--from", "3", stdin="n\n")
    assert declined.returncode == 1 and "nothing was changed" in declined.stderr

    schemas.publish(redis_client, [_chain(changed=True)])  # a deploy changed the graph since
    changed = cli("fork", source, "--from", "3", "--yes")
    assert changed.returncode == 1, changed.stderr
    assert "saved by another version of graph 'chain'" in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1
    assert _written(client, redis_client, queue, source) == before


def test_replay_from_a_seq_is_refused_for_a_changed_graph_and_bad_usage(
    cli: Cli, client: Client, harness: Harness, redis_client: redis.Redis, queue: str
) -> None:
    key = uuid.uuid4().hex
    redis_client.set(bad_key(key), 1)
    run_id = harness.create(chain, key)
    with pytest.raises(Exception, match="t5 refuses"):
        harness.attempt(chain, run_id)
    client.cancel(run_id)
    for usage in (["--from", "3", "--from-start"], ["other-run", "--from", "3"]):
        assert cli("dlq", "replay", run_id, *usage, "--yes").returncode == 2
    assert cli("dlq", "replay", "--all", "--from", "3", "--yes").returncode == 2
    assert cli("dlq", "replay", run_id, "--from", "9", "--yes").returncode == 2
    schemas.publish(redis_client, [_chain(changed=True)])
    before = _written(client, redis_client, queue, run_id)
    refused = cli("dlq", "replay", run_id, "--from", "3", "--yes")
    assert refused.returncode == 1 and "another version of graph" in refused.stderr
    with pytest.raises(StaleCheckpoint) as caught:
        client.replay(run_id, from_seq=3)
    assert (caught.value.seq, caught.value.reason) == (3, "graph_changed")
    assert _written(client, redis_client, queue, run_id) == before
    assert client.get(run_id).status is Status.CANCELLED


def test_fork_errors_name_locations_never_values(client: Client, source: str) -> None:
    with pytest.raises(InvalidInputs) as caught:
        client.fork(source, from_seq=2, state={"total": SECRET, "visited": [1]})
    assert sorted(tuple(e["loc"]) for e in caught.value.errors) == [  # type: ignore[arg-type]
        ("state", "total"), ("state", "visited", 0),
    ]  # fmt: skip
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.errors)


def test_async_client_reads_checkpoints_and_forks(redis_url: str, queue: str, source: str) -> None:
    async def scenario() -> None:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            assert [c.seq for c in await aclient.checkpoints(source)] == [1, 2, 3, 4, 5, 6]
            assert (await aclient.checkpoint(source, 2)).state == {"total": 3, "visited": ["t1", "t2"]}
            planned = await aclient.check_fork(source, from_seq=2, patch={"total": 0})
            assert planned.state == {"total": 0, "visited": ["t1", "t2"]}
            with pytest.raises(InvalidInputs):
                await aclient.fork(source, from_seq=2, state={"bogus_field": 1})
            fork_id = await aclient.fork(source, from_seq=6)
            assert (await aclient.get(fork_id)).output == 21

    asyncio.run(scenario())


def test_the_cli_shows_a_checkpoint_of_a_forked_run_as_copied(cli: Cli, client: Client, source: str) -> None:
    fork_id = client.fork(source, from_seq=3, state={"total": 0, "visited": []})
    table = cli("checkpoints", fork_id)
    assert table.returncode == 0 and "fork" in table.stdout and "t4" in table.stdout
    shown = cli("checkpoint", fork_id, "3")
    assert f"by a fork (copied from run {source})" in shown.stdout and '"visited": []' in shown.stdout
    assert f"forked from {source} at checkpoint #3" in table.stdout
    assert json.loads(cli("status", fork_id, "--json").stdout)["forked_at_seq"] == 3
    assert client.store.client.exists(keys.ckpt(source)), "the source keeps its own checkpoints"


def test_fork_validates_its_state_before_it_asks_and_refuses_unknown_fields(
    cli_here: CliHere, client: Client, redis_client: redis.Redis, queue: str, source: str
) -> None:
    before = _written(client, redis_client, queue, source)
    # No --yes and no answer: a state the fork refuses is refused before the question.
    bogus = cli_here("fork", source, "--from", "3", "--state", '{"bogus_field": 1}', stdin="")
    assert bogus.returncode == 2, bogus.stderr
    assert "state.bogus_field: is not allowed here" in bogus.stderr and "fork run" not in bogus.stdout
    with pytest.raises(InvalidInputs) as caught:
        client.fork(source, from_seq=3, state={"total": 1, "visited": [], "bogus_field": 1})
    assert [e["loc"] for e in caught.value.errors] == [["state", "bogus_field"]]
    assert cli_here("fork", source, "--from", "3", "--patch", '{"totl": 1}', "--yes").returncode == 2
    both = cli_here("fork", source, "--from", "3", "--state", "{}", "--patch", "{}", "--yes")
    assert both.returncode == 2 and "--state and --patch exclude each other" in both.stderr
    with pytest.raises(InvalidInputs, match="patch must be a JSON object"):
        client.fork(source, from_seq=3, patch=[1])
    assert _written(client, redis_client, queue, source) == before


def test_fork_patch_merges_into_the_checkpoint_state(cli_here: CliHere, client: Client, source: str) -> None:
    planned = client.check_fork(source, from_seq=3, patch={"total": 100})
    assert planned.state == {"total": 100, "visited": ["t1", "t2", "t3"]}, "merged, the rest as saved"
    assert client.checkpoint(source, 3).state["total"] == 6, "a check writes nothing"
    patched = cli_here("fork", source, "--from", "3", "--patch", '{"total": 100}', stdin="y\n")
    assert patched.returncode == 0, patched.stderr
    assert "with its state patched at state.total?" in patched.stdout
    fork_id = patched.stdout.strip().splitlines()[-1]
    assert client.checkpoint(fork_id, 3).state == planned.state
    assert client.get(fork_id).forked_from == source


def test_a_fork_keeps_the_source_priority_unless_given_one(
    cli_here: CliHere, client: Client, harness: Harness
) -> None:
    plain_run = harness.create(chain, uuid.uuid4().hex)
    assert client.get(plain_run).priority == 0, "0 is the default, as docs/guide.md says"
    source = client.enqueue("chain", uuid.uuid4().hex, priority=9)
    assert harness.attempt(chain, source) == 21
    assert client.get(client.fork(source, from_seq=3)).priority == 9
    assert client.get(client.fork(source, from_seq=3, priority=2)).priority == 2
    given = cli_here("fork", source, "--from", "3", "--priority", "4", "--yes")
    assert given.returncode == 0, given.stderr
    assert client.get(given.stdout.strip()).priority == 4
    assert cli_here("fork", source, "--from", "3", "--priority", "10", "--yes").returncode == 2
