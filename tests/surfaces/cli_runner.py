"""The CLI run in this process the way the console script runs it (``reflexr_graph.cli.run``): the
same parsing, commands and error reports, without a Python start-up per call (a second or more
each on a loaded machine, the most of what a CLI test took).

What a subprocess would have had from its environment, the call gets here: exactly the
``REFLEXR_*`` settings of ``env``, ``COLUMNS`` as the width of the CLI's consoles (made once, at
import), no colours, and ``stdin``. Only the commands that run a server or a worker (``serve``
past its checks, ``worker``, ``demo``) need a real process; their tests start one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping

import pytest
from typer.testing import CliRunner

from reflexr_graph import cli
from reflexr_graph.cli import render

DEFAULT_COLUMNS = 80
"""What rich assumes without a terminal or ``COLUMNS``, as the console script would."""


def run_cli(
    args: list[str], env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``reflexr-graph ARGS...`` on ``env``, answered as a finished subprocess would be."""
    settings: dict[str, str | None] = {k: None for k in os.environ if k.upper().startswith("REFLEXR_")}
    settings |= {k: v for k, v in env.items() if k.upper().startswith("REFLEXR_")}
    settings["COLUMNS"] = env.get("COLUMNS")
    width = int(env.get("COLUMNS") or DEFAULT_COLUMNS)
    for console in (render.out, render.err):
        monkeypatch.setattr(console, "_width", width)
        monkeypatch.setattr(console, "_color_system", None)
    with CliRunner().isolation(input=stdin, env=settings) as (stdout, stderr, _output):
        try:
            code = cli.run(list(args))
        except SystemExit as exc:  # what the console script would exit with
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()  # text wrappers over the captured bytes
        sys.stderr.flush()
        printed = stdout.getvalue().decode(), stderr.getvalue().decode()
    return subprocess.CompletedProcess(["reflexr-graph", *args], code, *printed)


CliHere = Callable[..., subprocess.CompletedProcess[str]]
"""``cli_here(ARGS..., stdin=..., width=..., env=...)``: see the fixture."""


@pytest.fixture
def cli_here(redis_url: str, queue: str, monkeypatch: pytest.MonkeyPatch) -> CliHere:
    """The CLI on the test's Redis and queue, in this process (:func:`run_cli`), on a terminal
    ``width`` columns wide (200 unless told); ``env`` adds or overrides settings."""

    def run(
        *args: str, stdin: str | None = None, width: int = 200, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        settings = {"REFLEXR_REDIS_URL": redis_url, "REFLEXR_QUEUE": queue, **(env or {})}
        return run_cli(list(args), {**settings, "COLUMNS": str(width)}, monkeypatch, stdin)

    return run
