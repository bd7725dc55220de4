"""What the CLI prints for people, on an 80-column terminal: whole run ids, help without type
placeholders, readable history, a cut-short status, a watch that ends its line."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import threading
import uuid
from collections.abc import Callable
from importlib.metadata import version

import pytest
import redis
from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext
from typer.main import get_command
from typer.testing import CliRunner

from reflexr_graph import GraphAction, clock, schemas
from reflexr_graph.cli import app
from reflexr_graph.client import Client
from reflexr_graph.core.limits import LimitRequest
from reflexr_graph.core.port import Boundary, Notes
from reflexr_graph.store import RedisStore, keys
from tests.store.support import FakeClock
from tests.surfaces.cli_runner import CliHere, run_cli
from tests.surfaces.conftest import BIN, Cli
from tests.waiting import wait_for

WIDTH = 80


CliAt = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli_at(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> CliAt:
    """``cli_at(width, ARGS...)``: the console script on a terminal ``width`` columns wide (in this
    process, as the ``cli`` fixture runs it)."""

    def run(width: int, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), {**env, "COLUMNS": str(width)}, monkeypatch)

    return run


@pytest.fixture
def cli80(cli_at: CliAt) -> Cli:
    return functools.partial(cli_at, WIDTH)


@pytest.fixture
def store(redis_url: str) -> RedisStore:
    return RedisStore.from_url(redis_url)


def _fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide


def _command_paths() -> list[list[str]]:
    root = get_command(app)
    paths: list[list[str]] = [[]]
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        sub = getattr(command, "commands", None)
        paths += [[name, s] for s in sub] if sub else [[name]]
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "root")
def test_help_shows_no_type_placeholders(path: list[str]) -> None:
    if path == ["worker"]:
        pytest.skip("worker passes --help on to celery")
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output and "[[" not in result.output, result.output
    _fits(result.output)


def _groups() -> list[list[str]]:
    root = get_command(app)
    return [[]] + [[name] for name, command in root.commands.items() if getattr(command, "commands", None)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("group", _groups(), ids=lambda p: " ".join(p) or "root")
def test_help_at_100_columns_gives_each_commands_description_whole(group: list[str]) -> None:
    """Issue 34: click cut every description at about 45 characters with "...", at any width."""
    result = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "100"}, terminal_width=100)
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:", 1)[1]
    assert "..." not in listed, listed
    assert all(len(line) <= 100 for line in result.output.splitlines()), result.output
    command = get_command(app)
    for name in group:
        command = command.commands[name]  # type: ignore[attr-defined]
    flowing = " ".join(listed.split())
    for name, sub in command.commands.items():  # type: ignore[attr-defined]
        described = " ".join(sub.help.split("\n\n")[0].split()).removesuffix(".")
        assert f"{name} {described.split('. ')[0]}" in flowing.replace("- ", "-"), name


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"reflexr-graph {version('reflexr-graph')}"


@pytest.mark.usefixtures("published")
def test_run_ids_stay_whole_at_80_columns(
    cli80: Cli, cli_at: CliAt, client: Client, store: RedisStore
) -> None:
    queued = [client.enqueue("counter", {"key": f"k{i}", "n": i}) for i in range(2)]
    dead = str(uuid.uuid4())
    store.dead_letter(
        dead, reason="invalid_inputs", error_type="InvalidInputs", message="bad", graph="a-long-graph-name-x"
    )
    runs = cli80("runs")
    assert runs.returncode == 0, runs.stderr
    _fits(runs.stdout)
    for run_id in [*queued, dead]:
        assert re.search(rf"\b{run_id}\b", runs.stdout), runs.stdout
    assert "left out" in runs.stderr and "--json" in runs.stderr
    listed = cli80("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    _fits(listed.stdout)
    assert re.search(rf"\b{dead}\b", listed.stdout), listed.stdout
    wide = cli_at(200, "runs")
    assert "next node" in wide.stdout and wide.stderr == ""


def _run_with_a_retry(store: RedisStore, run_id: str, delay_ms: int) -> None:
    """A run whose first attempt saved two checkpoints, then failed and waits for its retry."""
    store.create_run(run_id, graph="counter", inputs_json="{}", max_attempts=3, dispatch_grace_ms=30_000)
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=30_000, worker="w1@host").context()
    store.save_checkpoint(ctx, Boundary('{"a": 1}', seq=1, next_node="s2"))
    store.save_checkpoint(ctx, Boundary('{"a": 2}', seq=2, next_node="s3"))
    store.fail(
        ctx,
        error_type="ValueError",
        message="broke",
        traceback=None,
        reason="step_failed",
        permanent=False,
        retry_delay_ms=delay_ms,
    )


def test_history_shows_times_and_step_durations(
    cli80: Cli, store: RedisStore, redis_client: redis.Redis
) -> None:
    run_id = str(uuid.uuid4())
    _run_with_a_retry(store, run_id, delay_ms=5_000)
    due_at_ms = next(e.fields["due_at"] for e in store.events(run_id) if e.type == "run_retrying")
    result = cli80("history", run_id)
    assert result.returncode == 0, result.stderr
    _fits(result.stdout)
    assert due_at_ms not in result.stdout, "an epoch-ms field is shown as a time"
    assert "(in 5.0s)" in result.stdout
    assert re.search(r"\b\d\d:\d\d:\d\d\.\d{3}\b", result.stdout)
    # Each checkpoint, and the failure, shows how long the step(s) before it took.
    timed = re.findall(r"(\d+ms|\d+\.\d+s)\s+(run_progressed|attempt_failed)", result.stdout)
    assert [kind for _took, kind in timed] == ["run_progressed", "run_progressed", "attempt_failed"]
    raw = json.loads(cli80("history", run_id, "--json").stdout)
    assert any(e["fields"].get("due_at") == due_at_ms for e in raw), "--json keeps the raw fields"


def test_status_cuts_a_long_output_short(cli80: Cli, store: RedisStore) -> None:
    run_id = str(uuid.uuid4())
    output = {"items": [{"i": i, "name": f"item {i}"} for i in range(300)]}
    store.create_run(run_id, graph="counter", inputs_json="{}", max_attempts=1, dispatch_grace_ms=30_000)
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=30_000).context()
    store.succeed(ctx, json.dumps(output))

    short = cli80("status", run_id)
    assert short.returncode == 0, short.stderr
    assert len(short.stdout.splitlines()) < 60
    assert f"reflexr-graph status {run_id} --full" in short.stderr and "more lines" in short.stderr
    assert '"item 299"' not in short.stdout
    full = cli80("status", run_id, "--full")
    assert '"item 299"' in full.stdout and full.stderr == ""
    as_json = cli80("status", run_id, "--json")
    assert json.loads(as_json.stdout)["output"] == output, "--json is never cut"


@pytest.mark.usefixtures("published")
def test_watch_ends_its_line_and_counts_checkpoints(cli80: Cli, client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "w", "n": 1})
    client.cancel(run_id)
    result = cli80("watch", run_id)
    assert result.returncode == 1, "a cancelled run ends the watch with exit 1"
    assert result.stdout.endswith("\n")
    assert "checkpoints saved" in result.stdout and "steps done" not in result.stdout
    assert f"run {run_id} ended cancelled" in result.stderr


@pytest.mark.usefixtures("published")
def test_enqueue_suggests_the_graph_meant(cli80: Cli) -> None:
    result = cli80("enqueue", "countr", "--input", "{}")
    assert result.returncode == 2
    assert "did you mean 'counter'?" in result.stderr
    far = cli80("enqueue", "zzzz", "--input", "{}")
    assert (
        far.returncode == 2
        and "did you mean" not in far.stderr
        and "published: approvals, blocker, counter" in far.stderr
    )


def test_history_times_a_step_across_the_events_written_inside_it(
    cli_here: CliHere, store: RedisStore
) -> None:
    """A limit's grant, a cancel that waits for the step and a checkpoint's notes (skipped
    boundaries, reused work) come before the checkpoint that ends the step: its took column
    still says how long it took; so does the success that ends the graph's last step."""
    run_id = str(uuid.uuid4())
    fake = FakeClock()
    previous = clock.set_source(fake)
    try:
        store.create_run(run_id, graph="counter", inputs_json="{}", max_attempts=3, dispatch_grace_ms=30_000)
        ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=30_000).context()
        fake.advance(1_500)
        limit = LimitRequest("api", 1000.0, 1, 0, "m", "work", 1_500, "1/s")
        assert store.acquire_limit(ctx, limit, slot_ttl_ms=30_000).ok
        fake.advance(1_000)
        assert store.cancel(run_id).cancel_requested  # the step goes on to its boundary
        fake.advance(1_000)
        notes = Notes(skipped=1, skip_kinds="s1: untyped x1", reused_steps=2)
        store.save_checkpoint(ctx, Boundary('{"a": 1}', seq=1, next_node="s2", notes=notes))
        # The graph's last step ends with the run's success, not with a checkpoint.
        last = str(uuid.uuid4())
        store.create_run(last, graph="counter", inputs_json="{}", max_attempts=3, dispatch_grace_ms=30_000)
        last_ctx = store.claim(last, uuid.uuid4().hex, lease_ttl_ms=30_000).context()
        fake.advance(2_000)
        store.succeed(last_ctx, '"done"')
    finally:
        clock.set_source(previous)
    kinds = [e.type for e in store.events(run_id)]
    assert kinds[-5:] == [
        "limit_waited",
        "cancel_requested",
        "boundaries_skipped",
        "work_reused",
        "run_progressed",
    ]
    shown = cli_here("history", run_id, width=80)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"3\.5s\s+run_progressed", shown.stdout), shown.stdout
    ended = cli_here("history", last, width=80)
    assert re.search(r"2\.0s\s+run_succeeded", ended.stdout), ended.stdout


class _InputsOfALongGraph(BaseModel):
    customer_identifier: str
    onboarding_document_url: str


def _long_named_graph() -> GraphAction:
    g = GraphBuilder(
        name="customer-onboarding-review-pipeline", input_type=_InputsOfALongGraph, output_type=str
    )

    @g.step
    async def only(ctx: StepContext[None, None, _InputsOfALongGraph]) -> str:
        return ctx.inputs.customer_identifier

    g.add(g.edge_from(g.start_node).to(only), g.edge_from(only).to(g.end_node))
    return GraphAction(g.build())


@pytest.mark.usefixtures("published")
def test_dlq_list_and_graphs_keep_what_matters_at_80_columns(
    cli_here: CliHere, store: RedisStore, redis_client: redis.Redis
) -> None:
    dead = str(uuid.uuid4())
    store.dead_letter(
        dead,
        reason="max_interruptions",
        error_type="X",
        message="m",
        graph="a-long-graph-name-x",
        max_attempts=3,
    )
    listed = cli_here("dlq", "list", width=WIDTH)
    assert listed.returncode == 0, listed.stderr
    _fits(listed.stdout)
    header = listed.stdout.splitlines()[2]
    assert "reason" in header and "attempt" in header and "status" not in header, listed.stdout
    assert re.search(rf"\b{dead}\b.*\bmax_interruptions\b.*\b0 \(0/3\)", listed.stdout), listed.stdout
    schemas.publish(redis_client, [_long_named_graph()])
    shown = cli_here("graphs", width=WIDTH)
    assert shown.returncode == 0, shown.stderr
    _fits(shown.stdout)
    assert "customer-onboarding-review-pipeline" in shown.stdout, "a graph's name is never split"
    assert "left out to fit 80 columns" in shown.stderr
    assert all(
        name in cli_here("graphs", width=200).stdout for name in ("onboarding_document_url", "published")
    )


def test_status_runs_and_history_number_attempts_the_same_way(cli_here: CliHere, store: RedisStore) -> None:
    """A run released twice to wait for a limit, then running: history says attempt 3; status
    and runs say attempt 3 too, and that 1 of its 3 counts toward max attempts."""
    run_id = str(uuid.uuid4())
    fake = FakeClock()
    previous = clock.set_source(fake)
    try:
        store.create_run(run_id, graph="counter", inputs_json="{}", max_attempts=3, dispatch_grace_ms=30_000)
        for n in range(2):
            ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=30_000).context()
            store.wait(ctx, field=f"l|s1|r{n}|x", signal="limit:api", wake_at_ms=fake.ms + 1_000)
            if n == 0:
                waiting = cli_here("status", run_id)
                assert (
                    "attempt 1 (0/3 counted toward max attempts; 1 ended waiting, not counted)"
                    in " ".join(waiting.stdout.split())
                ), waiting.stdout
            fake.advance(1_000)
        store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=30_000)
    finally:
        clock.set_source(previous)
    history = cli_here("history", run_id).stdout
    assert re.findall(r"attempt=(\d)", history) == ["1", "1", "2", "2", "3"], history
    status = " ".join(cli_here("status", run_id).stdout.split())
    assert "attempt 3 (1/3 counted toward max attempts; 2 ended waiting, not counted)" in status, status
    assert re.search(rf"\b{run_id}\b.*running.*\b3 \(1/3\)", cli_here("runs").stdout)
    info = store.get(run_id)
    assert (info.attempt, info.attempts, info.suspensions, info.interruptions) == (3, 1, 2, 0)


@pytest.mark.usefixtures("published")
def test_watch_piped_to_a_file_writes_each_event_as_it_comes(client: Client, env: dict[str, str]) -> None:
    """Issue 34: `watch RUN > log` showed nothing until the run ended (rich draws its live panel
    only on a terminal); piped, it writes a line per event, flushed, while the run goes on."""
    run_id = client.enqueue("approvals", "piped")
    proc = subprocess.Popen(
        [str(BIN / "reflexr-graph"), "watch", run_id], env=env, stdout=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: any("status queued" in line for line in lines), timeout=30, what="the queued line")
        assert any("run_enqueued" in line for line in lines)
        claim = client.store.claim(run_id, "token-1", lease_ttl_ms=30_000)
        client.store.wait(
            claim.context(), field="w|decide|-|d|approval|0", signal="approval", wake_at_ms=None
        )
        wait_for(lambda: any("status waiting" in line for line in lines), timeout=30, what="the waiting line")
        assert proc.poll() is None, "the run has not ended, nor has the watch"
        client.cancel(run_id)
        assert proc.wait(timeout=30) == 1, "a cancelled run ends the watch with exit 1"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
    assert "status cancelled" in lines[-1]


@pytest.mark.usefixtures("published")
def test_status_counts_what_retries_reused_in_the_right_number(
    cli80: Cli, client: Client, redis_client: redis.Redis
) -> None:
    """Issue 34: "0 branch steps, 1 durable calls" read wrong."""
    run_id = client.enqueue("counter", {"key": "n", "n": 1})
    redis_client.hset(
        keys.run(run_id), mapping={"reused_steps": 0, "reused_calls": 1}
    )  # as a retry records them
    assert re.search(
        r"reused on retries +0 branch steps, 1 durable call *$", cli80("status", run_id).stdout, re.M
    )
