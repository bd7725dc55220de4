"""Issue 34: every CLI command that takes a run takes the start of its id (8 characters or more),
as the console's search does; a prefix that starts more than one run, or a short one that is no
run's id, is refused with one line and exit code 2."""

from __future__ import annotations

import json

import pytest

from reflexr_graph.client import Client
from reflexr_graph.errors import AmbiguousRunId, RunNotFound
from reflexr_graph.model import Status
from reflexr_graph.store.attempts import NewRun, new_run
from tests.surfaces.cli_runner import CliHere

TWINS = ("abcd1234-0001", "abcd1234-0002")
SINGLE = "feed5678-9abc-def0"


@pytest.fixture
def runs(client: Client) -> None:
    for run_id in (*TWINS, SINGLE):
        client.store.do(new_run(NewRun(run_id, "counter", '{"key": "a", "n": 1}', None, None, 3, 60_000)))


@pytest.mark.usefixtures("runs")
def test_a_unique_prefix_names_its_run_on_every_kind_of_command(cli_here: CliHere, client: Client) -> None:
    shown = cli_here("status", "feed5678", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == SINGLE
    history = cli_here("history", "feed5678-9a")
    assert history.returncode == 0 and "run_enqueued" in history.stdout
    cancelled = cli_here("cancel", "feed5678", "--yes")
    assert cancelled.returncode == 0, cancelled.stderr
    assert client.get(SINGLE).status is Status.CANCELLED
    purged = cli_here("purge", "feed5678", "--yes")  # a list of RUNs
    assert purged.returncode == 0, purged.stderr
    assert purged.stdout.startswith("purged: 1 of 1")
    with pytest.raises(RunNotFound):
        client.get(SINGLE)
    assert client.resolve_run_id(TWINS[0]) == TWINS[0], "a whole id is taken as it is"


@pytest.mark.usefixtures("runs")
def test_an_ambiguous_or_short_prefix_is_refused_in_one_line(cli_here: CliHere, client: Client) -> None:
    twins = cli_here("status", "abcd1234")
    assert twins.returncode == 2
    assert twins.stderr.strip() == (
        f"error: run id prefix abcd1234 matches 2 runs ({TWINS[0]}, {TWINS[1]}): give more of the id"
    )
    short = cli_here("history", "abcd")
    assert short.returncode == 2 and len(short.stderr.strip().splitlines()) == 1
    assert "a run id prefix needs at least 8 characters" in short.stderr
    with pytest.raises(AmbiguousRunId):
        client.resolve_run_id("abcd1234-000")
    unknown = cli_here("status", "no-such-run")
    assert unknown.returncode == 2 and "no run no-such-run" in unknown.stderr
