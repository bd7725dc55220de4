"""The typer app, its global options, and the client the commands share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import typer

from reflexr_graph.client import Client
from reflexr_graph.fleet.settings import load_settings

app = typer.Typer(
    name="reflexr-graph",
    help="Run durable pydantic-graph workflows on Celery + Redis, and operate their runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
dlq_app = typer.Typer(help="Dead-lettered runs: list, show, replay, purge.", no_args_is_help=True)
app.add_typer(dlq_app, name="dlq")


@dataclass
class CliState:
    """Global options; the client is created on first use, so ``--help`` needs no Redis."""

    redis_url: str | None = None
    _client: Client | None = field(default=None, repr=False)

    @property
    def client(self) -> Client:
        if self._client is None:
            settings = (
                load_settings(strict=False, redis_url=self.redis_url)
                if self.redis_url
                else load_settings(strict=False)
            )
            self._client = Client(settings)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def client_of(ctx: typer.Context) -> Client:
    """The client of this invocation."""
    state = ctx.find_root().obj
    assert isinstance(state, CliState)
    return state.client


@app.callback()
def _global(
    ctx: typer.Context,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            help="Redis URL of the fleet; overrides REFLEXR_REDIS_URL.",
            show_default=False,
        ),
    ] = None,
) -> None:
    state = CliState(redis_url=redis_url)
    ctx.obj = state
    ctx.call_on_close(state.close)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
GraphOpt = Annotated[str | None, typer.Option("--graph", "-g", help="Only runs of this graph.")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", "-r", help="Only runs dead for this reason.")]


def confirm(question: str, yes: bool) -> None:
    """Ask unless ``--yes``; declining ends the command with exit code 1."""
    from reflexr_graph.cli.failures import CommandFailed

    if yes:
        return
    if not typer.confirm(question, default=False):
        raise CommandFailed("cancelled: nothing was changed (pass --yes to skip this question)")
