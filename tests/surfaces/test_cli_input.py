"""CLI bad usage and bad input: exit code 2, a message saying what to fix, nothing queued."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.store import fanout, keys
from tests.surfaces.conftest import Cli

SECRET = "hunter2-private-value"

pytestmark = pytest.mark.usefixtures("published")


def nothing_queued(r: redis.Redis, queue: str) -> bool:
    return int(r.llen(queue)) == 0 and fanout.total(r, keys.all_runs) == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["enqueue", "counter", "--input", "{bad"], "not valid JSON"),
        (["enqueue", "counter", "--input", "@/no/such/file.json"], "does not exist"),
        (["enqueue", "counter", "--input", '{"key": "a", "n": 1}', "--state", "[1,"], "--state"),
        (
            ["enqueue", "no-such-graph", "--input", "{}"],
            "no graph named 'no-such-graph' is published",
        ),
        (["enqueue", "counter", "--input", f'{{"key": "", "n": "{SECRET}"}}'], "inputs.n: must be of type"),
        (["enqueue", "counter"], "--input"),
        (["status", "no-such-run"], "no-such-run"),
        (["history", "no-such-run"], "no-such-run"),
        (["cancel", "no-such-run", "--yes"], "no-such-run"),
        (["dlq", "show", "no-such-run"], "no-such-run"),
        (["dlq", "replay", "no-such-run"], "no-such-run"),
        (["dlq", "replay", "--all"], "matched no dead-lettered runs"),
        (["dlq", "replay"], "--all"),
        (["dlq", "purge", "--all", "--yes"], "matched no dead-lettered runs"),
        (["runs", "--status", "bogus"], "bogus"),
    ],
)
def test_bad_input_exits_2_and_queues_nothing(
    cli: Cli, redis_client: redis.Redis, queue: str, args: list[str], says: str
) -> None:
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert nothing_queued(redis_client, queue)


def test_invalid_inputs_list_every_failing_field(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(f'{{"key": "", "n": -1, "note": "{SECRET}"}}')
    result = cli("enqueue", "counter", "--input", f"@{path}")
    assert result.returncode == 2
    assert "inputs.key: must have at least 1 character;" in result.stderr  # issue 34: not "1 characters"
    assert "inputs.n: must be >= 0" in result.stderr
    assert SECRET not in result.stderr


def test_replaying_an_active_run_is_refused(cli: Cli, client: Client, redis_client: redis.Redis) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    result = cli("dlq", "replay", run_id)
    assert result.returncode == 1, "a refused operation exits 1"
    assert "only dead or cancelled runs replay" in result.stderr


def test_declined_confirmation_changes_nothing(cli: Cli, client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    result = cli("cancel", run_id, stdin="n\n")
    assert result.returncode == 1
    assert client.get(run_id).status == "queued"


def test_replay_from_the_start_asks_first(cli: Cli, client: Client) -> None:
    """--from-start discards a run's checkpoint, so even one run is replayed only once confirmed."""
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    client.cancel(run_id)
    declined = cli("dlq", "replay", run_id, "--from-start", stdin="n\n")
    assert declined.returncode == 1 and "nothing was changed" in declined.stderr
    assert client.get(run_id).status == "cancelled"
    assert cli("dlq", "replay", run_id, "--from-start", "--yes").returncode == 0
    assert client.get(run_id).status == "queued"


def test_graphs_lists_published_schemas(cli: Cli) -> None:
    import json

    result = cli("graphs", "--json")
    assert result.returncode == 0, result.stderr
    entries = {g["name"]: g for g in json.loads(result.stdout)}
    assert entries["counter"]["inputs"]["required"] == ["key", "n"]
    assert "counter" in cli("graphs").stdout


def test_enqueue_and_runs_without_a_worker(cli: Cli, client: Client) -> None:
    import json

    result = cli("enqueue", "counter", "--input", '{"key": "a", "n": 1}', "--idempotency-key", "k1")
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    assert "already existed" not in result.stderr
    again = cli("enqueue", "counter", "--input", '{"key": "a", "n": 1}', "--idempotency-key", "k1", "--json")
    assert json.loads(again.stdout) == {"run_id": run_id, "created": False}
    # Issue 34: the same id again, and a word that the key named a run that already existed.
    told = cli("enqueue", "counter", "--input", '{"key": "a", "n": 1}', "--idempotency-key", "k1")
    assert told.stdout.strip() == run_id
    assert f"run {run_id} already existed: idempotency key 'k1' names it" in told.stderr
    listed = json.loads(cli("runs", "--status", "queued", "--json").stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    assert run_id in cli("runs", "--graph", "counter").stdout
    assert cli("history", run_id).returncode == 0
    assert "run_enqueued" in cli("history", run_id, "--json").stdout
