"""``reflexr-graph health``: the probe a container orchestrator runs against a worker.

Liveness asks only whether the worker's main process is still looping (its reaper touches
REFLEXR_HEALTH_FILE every tick), so a Redis outage does not get every worker restarted at
once. Readiness adds ``--redis``: a worker is of no use while it cannot reach Redis, and a
Redis that may lose runs (store/durability.py) fails it too, unless ``--allow-volatile``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from reflexr_graph.cli.app import app, client_of
from reflexr_graph.cli.failures import EXIT_UNREACHABLE, BadInput, CliError, CommandFailed
from reflexr_graph.config.settings import load_settings
from reflexr_graph.errors import RedisMisconfigured, StoreUnavailable
from reflexr_graph.store import server_version
from reflexr_graph.store.durability import durability_note, durability_warning


def _check_file(path: str, max_age_s: float) -> str:
    try:
        age = time.time() - Path(path).stat().st_mtime
    except FileNotFoundError:
        raise CommandFailed(
            f"no health file at {path}: the worker has not started, or runs elsewhere"
        ) from None
    if age > max_age_s:
        raise CommandFailed(
            f"health file {path} is {age:.0f}s old (limit {max_age_s:g}s): the worker's main process "
            "is stuck or gone"
        )
    return f"worker alive ({age:.1f}s ago)"


@app.command()
def health(
    ctx: typer.Context,
    max_age: Annotated[
        float,
        typer.Option("--max-age", min=0.1, metavar="S", help="Seconds the worker's health file may be old."),
    ] = 30.0,
    redis: Annotated[
        bool, typer.Option("--redis", help="Also check that Redis answers and will not lose runs.")
    ] = False,
    allow_volatile: Annotated[
        bool,
        typer.Option(
            "--allow-volatile",
            help="With --redis, accept a Redis that may evict keys or persists nothing (a scratch one).",
        ),
    ] = False,
) -> None:
    """Probe a worker: its health file is fresh (REFLEXR_HEALTH_FILE) and, with --redis, Redis answers
    and keeps its data (maxmemory-policy noeviction, persistence on)."""
    path = load_settings().health_file
    if not path and not redis:
        raise BadInput("nothing to check: set REFLEXR_HEALTH_FILE on the worker and here, or pass --redis")
    said = [_check_file(path, max_age)] if path else []
    if redis:
        said.append(_check_redis(ctx, allow_volatile))
    typer.echo("; ".join(said))


def _check_redis(ctx: typer.Context, allow_volatile: bool) -> str:
    """Redis answers, is recent enough for the scripts, and keeps what it is given (or the user
    accepted that it may not, with --allow-volatile)."""
    client = client_of(ctx)
    try:
        client.ping()
        version = client.store.do(server_version.check())
        found = client.durability()
    except RedisMisconfigured as exc:
        raise CliError(str(exc), EXIT_UNREACHABLE) from None
    except StoreUnavailable as exc:
        raise CliError(f"Redis does not answer: {exc}", EXIT_UNREACHABLE) from None
    warning = durability_warning(found)
    if warning is not None and not allow_volatile:
        raise CommandFailed(f"{warning}; or pass --allow-volatile to accept it")
    note = durability_note(found)
    said = f"version {version}; reflexr needs {server_version.MIN_TEXT} or later"
    return f"Redis answers ({said})" if note is None else f"Redis answers ({said}; {note})"
