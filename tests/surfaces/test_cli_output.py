"""What the CLI prints for people, on an 80-column terminal: whole run ids, help without type
placeholders, readable history, a cut-short status, a watch that ends its line."""

from __future__ import annotations

import functools
import re
import subprocess
import uuid
from collections.abc import Callable
from importlib.metadata import version

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from reflexr_graph.cli import app
from reflexr_graph.client import Client
from reflexr_graph.store import RedisStore
from tests.surfaces.conftest import BIN, CLI_TIMEOUT_S, ROOT, Cli

WIDTH = 80


CliAt = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli_at(env: dict[str, str]) -> CliAt:
    """``cli_at(width, ARGS...)``: the console script on a terminal ``width`` columns wide."""

    def run(width: int, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "reflexr-graph"), *args],
            env={**env, "COLUMNS": str(width)},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )

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
