"""What the CLI prints for people, on an 80-column terminal: whole run ids, help without type
placeholders, readable history, a cut-short status, a watch that ends its line."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from reflexr_graph.cli import app

WIDTH = 80


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
