"""The CLI run in this process, the way the console script runs it (``reflexr_graph.cli.run``):
the same parsing, commands and error reports, without a Python start-up per call.

``cli_here(ARGS..., stdin=..., width=...)`` answers like the ``cli`` fixture's subprocess (a
``CompletedProcess`` with ``returncode``, ``stdout`` and ``stderr``), on the test's Redis and
queue, on a terminal ``width`` columns wide (200 unless told); ``env`` adds or overrides settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from reflexr_graph import cli
from reflexr_graph.cli import render

CliHere = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli_here(redis_url: str, queue: str, monkeypatch: pytest.MonkeyPatch) -> CliHere:
    # Only the test's REFLEXR_* settings, as the subprocess fixture's environment has.
    settings: dict[str, str | None] = {k: None for k in os.environ if k.upper().startswith("REFLEXR_")}
    settings |= {"REFLEXR_REDIS_URL": redis_url, "REFLEXR_QUEUE": queue}

    def run(
        *args: str, stdin: str | None = None, width: int = 200, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # The consoles were made at import; a terminal's width is what they would have read.
        for console in (render.out, render.err):
            monkeypatch.setattr(console, "_width", width)
        with CliRunner().isolation(input=stdin, env=settings | (env or {})) as (stdout, stderr, _output):
            code = cli.run(list(args))
            sys.stdout.flush()  # text wrappers over the captured bytes
            sys.stderr.flush()
            printed = stdout.getvalue().decode(), stderr.getvalue().decode()
        return subprocess.CompletedProcess(list(args), code, *printed)

    return run
