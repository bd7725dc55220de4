"""``reflexr-graph signal``: a value is validated before anything is written, and every refusal says why
with its exit code (2 bad input, 1 a refused operation), never quoting the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.store import keys
from tests.surfaces.cli_runner import CliHere
from tests.surfaces.conftest import Cli

SECRET = "hunter2-private-value"


@pytest.fixture
def run_id(client: Client) -> str:
    return client.enqueue("approvals", "ticket")


def mailbox(r: redis.Redis, run_id: str) -> dict[bytes, bytes]:
    return r.hgetall(keys.mailbox(run_id))  # type: ignore[return-value]


def test_a_signal_to_a_run_not_waiting_yet_is_kept_for_its_wait(
    cli: Cli, run_id: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = tmp_path / "approval.json"
    path.write_text('{"approved": true, "by": "ana"}')
    result = cli("signal", run_id, "approval", "--value", f"@{path}", "--json")
    assert result.returncode == 0, result.stderr
    assert '"woke": false' in result.stdout
    assert mailbox(redis_client, run_id) == {b"approval": b'{"approved":true,"by":"ana"}'}
    again = cli("signal", run_id, "approval", "--value", '{"approved": false, "by": "bo"}')
    assert again.returncode == 1, again.stderr
    assert "already has a signal 'approval' that no wait has taken yet" in again.stderr
    assert mailbox(redis_client, run_id) == {b"approval": b'{"approved":true,"by":"ana"}'}, "the first stands"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("approval", f'{{"approved": "{SECRET}", "by": "x"}}', "value.approved: must be of type boolean"),
        ("approval", f'{{"by": "{SECRET}"}}', "value.approved: is required"),
        ("aproval", "{}", "graph 'approvals' declares no signal 'aproval' (it declares: 'approval')"),
        ("approval", "{not json", "--value: the argument is not valid JSON"),
    ],
)
def test_bad_values_and_unknown_names_exit_2_and_write_nothing(
    cli: Cli, run_id: str, redis_client: redis.Redis, name: str, value: str, says: str
) -> None:
    result = cli("signal", run_id, name, "--value", value)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert mailbox(redis_client, run_id) == {}


def test_a_bad_or_missing_value_is_named_as_the_signal_value_and_its_option(
    cli_here: CliHere, run_id: str, redis_client: redis.Redis
) -> None:
    bad = cli_here("signal", run_id, "approval", "--value", '{"approved": "yes", "by": "x"}')
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("error: invalid signal value; fix these fields: value.approved")
    malformed = cli_here("signal", run_id, "approval", "--value", "{not json")
    assert malformed.returncode == 2 and "e.g. --value '" in malformed.stderr
    assert "--input" not in bad.stderr + malformed.stderr
    missing = cli_here("signal", run_id, "approval")
    assert missing.returncode == 2, missing.stderr
    assert "--value is required: signal 'approval' takes a value" in missing.stderr
    assert "must be of type object" not in missing.stderr
    assert mailbox(redis_client, run_id) == {}


def test_signals_to_finished_and_unknown_runs_are_refused(cli: Cli, client: Client, run_id: str) -> None:
    client.cancel(run_id)
    finished = cli("signal", run_id, "approval", "--value", '{"approved": true, "by": "ana"}')
    assert finished.returncode == 1
    assert f"run {run_id} is cancelled; only a run that has not finished takes signals" in finished.stderr
    unknown = cli("signal", "no-such-run", "approval", "--value", "{}")
    assert unknown.returncode == 2
    assert "no run no-such-run" in unknown.stderr


def test_a_waiting_run_shows_in_status_runs_history_and_json_and_the_signal_wakes_it(
    cli: Cli, client: Client, run_id: str
) -> None:
    # Suspended as a worker's attempt would suspend it: claimed, then the step's wait.
    claim = client.store.claim(run_id, "token-1", lease_ttl_ms=30_000)
    client.store.wait(claim.context(), field="w|decide|-|d|approval|0", signal="approval", wake_at_ms=None)
    status = cli("status", run_id)
    assert "waiting" in status.stdout and "signal 'approval' (no timeout)" in status.stdout
    as_json = json.loads(cli("status", run_id, "--json").stdout)
    assert (as_json["status"], as_json["waiting_for"], as_json["wake_at"]) == ("waiting", "approval", None)
    assert run_id in cli("runs", "--status", "waiting").stdout
    assert run_id not in cli("runs", "--status", "queued").stdout
    woke = cli("signal", run_id, "approval", "--value", '{"approved": true, "by": "ana"}')
    assert woke.returncode == 0 and "it was waiting for it and is queued now" in woke.stdout
    history = cli("history", run_id).stdout
    assert "run_waiting" in history and "signal=approval" in history and "signal_received" in history
    assert client.get(run_id).status.value == "queued"


def test_status_wait_on_a_waiting_run_says_what_it_waits_for_and_exits_124(
    cli_here: CliHere, client: Client, run_id: str
) -> None:
    claim = client.store.claim(run_id, "token-1", lease_ttl_ms=30_000)
    client.store.wait(claim.context(), field="w|decide|-|d|approval|0", signal="approval", wake_at_ms=None)
    timed_out = cli_here("status", run_id, "--wait", "--timeout", "0.2")
    assert timed_out.returncode == 124, timed_out.stderr
    assert f"run {run_id} is still waiting after 0.2s: it waits for signal 'approval'" in timed_out.stderr
    assert "goes on once the signal is sent" in timed_out.stderr
    assert "check its workers" not in timed_out.stderr
    queued = client.enqueue("approvals", "other")
    still_queued = cli_here("status", queued, "--wait", "--timeout", "0.2")
    assert still_queued.returncode == 124, "no worker: still queued"
