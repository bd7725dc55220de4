"""The deploy recipe of docs/deploying.md ("Deploying a changed graph", issue 34 item 8), run as written.

The commands between the ``deploy-recipe`` markers are read from docs/deploying.md and run in their order,
against real workers, with the page's names swapped for the test's graph (``myapp.graphs:docpipe``
is version 2 of tests/fleet/version_graphs.py): a worker command starts a worker with
``reflexr-graph worker``, a ``reflexr-graph`` command runs the CLI, ``kill -TERM`` stops the old
worker. A run in flight on version 1 must end on version 2 without what had finished running again.
"""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet import version_graphs
from tests.fleet.conftest import Fleet, Worker, executions
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deploying.md"
V1, V2 = version_graphs.v1.version, version_graphs.v2.version
NAMES = {
    "myapp.graphs:docpipe": "tests.fleet.version_graphs:v2",
    "docpipe": version_graphs.NAME,
    "OLD_VERSION": V1,
}


def recipe() -> list[str]:
    """The recipe's command lines, in order, with the test's names."""
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- deploy-recipe -->", 1)[1].split("<!-- /deploy-recipe -->", 1)[0]
    shells = re.findall(r"```sh\n(.*?)```", block, flags=re.DOTALL)
    lines = [line.strip() for shell in shells for line in shell.splitlines() if line.strip()]
    return [re.sub("|".join(map(re.escape, NAMES)), lambda m: NAMES[m.group(0)], line) for line in lines]


def _verb(words: list[str]) -> str:
    """``kill``, or the ``reflexr-graph`` command a line runs."""
    return "kill" if words[0] == "kill" else words[words.index("reflexr-graph") + 1]


def test_the_documented_recipe_is_new_workers_check_upgrade_retire() -> None:
    verbs = [_verb(shlex.split(line)) for line in recipe()]
    assert verbs == ["worker", "check-checkpoints", "versions", "upgrade", "kill"]
    assert "--resume-compatible" in recipe()[3] and "--include-running" in recipe()[3]


def _run(line: str, fleet: Fleet, old: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """One recipe line, as a shell would run it here."""
    words = shlex.split(line)
    if _verb(words) == "kill":
        old.signal(signal.SIGTERM)
        old.wait_exit()
        return
    env = dict(w.split("=", 1) for w in words[: words.index("reflexr-graph")])
    args = words[words.index("reflexr-graph") + 1 :]
    if args == ["worker"]:
        fleet.start(entry="reflexr-graph", **env)
        return
    done = run_cli(
        args, {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue, **env}, monkeypatch
    )
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    if args[0] == "check-checkpoints":
        assert "1 would resume, 0 would start over" in done.stdout, done.stdout
    if args[0] == "upgrade":
        assert "1 running run(s) move once their attempt ends" in done.stdout, done.stdout


def test_the_documented_deploy_recipe_moves_a_run_in_flight_to_the_new_version(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run mid-step on version 1; the recipe's commands, in order: it finishes on version 2,
    its first step (finished on version 1) not run again."""
    old = fleet.start(REFLEXR_GRAPHS="tests.fleet.version_graphs:v1")
    client = client_for(fleet)
    run_id = client.enqueue(version_graphs.NAME, {"value": 1, "gate": "s2@v1"})
    ran = lambda: [e.rsplit(":", 1)[0] for e in executions(redis_client, run_id)]  # noqa: E731
    wait_for(lambda: "s2@v1" in ran(), 30, "the run at s2 on version 1")
    for line in recipe():
        _run(line, fleet, old, monkeypatch)
    info = client.wait(run_id, timeout=90)
    assert (info.status, info.version) == (Status.SUCCEEDED, V2)
    assert ran() == ["s1@v1", "s2@v1", "s2@v2", "s2b@v2", "s3@v2"], "resumed at s2 on version 2"
