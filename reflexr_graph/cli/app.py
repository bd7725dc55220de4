"""The typer app, its global options, and the client the commands share."""

from __future__ import annotations

import getpass
import logging
import os
import socket
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Annotated

import typer
from redis import exceptions as redis_errors
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry
from typer._click import Context as ClickContext  # typer vendors its own click
from typer._click import HelpFormatter
from typer.core import TyperGroup

from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.config.store import store_options
from reflexr_graph.store.redis_store import RedisStore

CONNECT_TIMEOUT_S = 2.0
"""The CLI's TCP connect and TLS handshake limit: a wrong host, port or TLS setting shows in
seconds. (Workers wait longer: they must ride out a blip, a person at a terminal need not.)"""
_RETRY = Retry(
    ExponentialWithJitterBackoff(base=0.05, cap=0.5),
    1,
    # A dropped connection is worth one quick retry; a timeout already took seconds, and
    # retrying it would only double the wait before the error says what to fix.
    supported_errors=(redis_errors.ConnectionError,),
)


_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc."})


def first_sentence(text: str) -> str:
    """The first sentence of a command's help: its first paragraph up to the first word that ends
    with a full stop, as click chooses it, but never cut short."""
    words: list[str] = []
    for word in text.split("\n\n", 1)[0].split():
        words.append(word)
        if word.endswith(".") and word.lower().strip("(") not in _ABBREVIATIONS:
            break
    return " ".join(words)


class Group(TyperGroup):
    """A command group whose list of commands gives each one's first sentence whole, wrapped in
    its column to the terminal's width; click cut it at about 45 characters with "...", whatever
    the width."""

    def format_commands(self, ctx: ClickContext, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.short_help or first_sentence(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


HELP_MAX_WIDTH = 140
"""Help is laid out to the terminal's width, up to this (click's own limit is 80): at 100 columns a
description has room to be read."""

app = typer.Typer(
    name="reflexr-graph",
    help="Run durable pydantic-graph workflows on Celery + Redis, and operate their runs.",
    cls=Group,
    context_settings={"max_content_width": HELP_MAX_WIDTH},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich panels print a type placeholder even for flags (`--help <bool>`).
    rich_markup_mode=None,
)
dlq_app = typer.Typer(help="Dead-lettered runs: list, show, replay, purge.", cls=Group, no_args_is_help=True)
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
            store = RedisStore.from_url(
                settings.redis_url,
                options=store_options(settings),
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                retry=_RETRY,
            )
            self._client = Client(settings, store=store, by=cli_identity())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def cli_identity() -> str:
    """Who the CLI acts as, recorded as ``by`` on the signals, cancels and replays it sends:
    ``cli@<user>@<host>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container's uid)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"cli@{user}@{socket.gethostname()}"


def client_of(ctx: typer.Context) -> Client:
    """The client of this invocation."""
    state = ctx.find_root().obj
    assert isinstance(state, CliState)
    return state.client


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"reflexr-graph {version('reflexr-graph')}")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            metavar="URL",
            help="Redis URL of the fleet; overrides REFLEXR_REDIS_URL.",
            show_default=False,
        ),
    ] = None,
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    _debug: Annotated[
        bool, typer.Option("--debug", help="On an error, also print its traceback (for bug reports).")
    ] = False,
) -> None:
    state = CliState(redis_url=redis_url)
    ctx.obj = state
    ctx.call_on_close(state.close)
    if ctx.invoked_subcommand not in ("worker", "demo"):  # those log as a worker does
        _show_warnings()


class _WarningLine(logging.Handler):
    """The library's warnings (no live worker serves a graph, an unknown REFLEXR_* setting) as
    one ``warning: ...`` line each on stderr, so a person or a script sees them."""

    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(f"{record.levelname.lower()}: {record.getMessage()}", err=True)


def _show_warnings() -> None:
    logger = logging.getLogger("reflexr_graph")
    if not any(isinstance(h, _WarningLine) for h in logger.handlers):
        handler = _WarningLine(level=logging.WARNING)
        logger.addHandler(handler)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
GraphOpt = Annotated[
    str | None, typer.Option("--graph", "-g", metavar="GRAPH", help="Only runs of this graph.")
]
ReasonOpt = Annotated[
    str | None, typer.Option("--reason", "-r", metavar="REASON", help="Only runs dead for this reason.")
]
TagOpt = Annotated[
    list[str] | None,
    typer.Option("--tag", "-t", metavar="KEY=VALUE", help="A tag; give it again for more (all must match)."),
]


def _resolve_run(ctx: typer.Context, value: str | None) -> str | None:
    """A RUN given as the start of its id (8 characters or more) becomes the whole id, through
    the one lookup every surface shares (``store/run_ids.py``); an ambiguous one is refused."""
    if value is None or ctx.resilient_parsing:
        return value
    return client_of(ctx).resolve_run_id(value)


def _resolve_runs(ctx: typer.Context, values: list[str] | None) -> list[str] | None:
    """Each RUN of a list, as :func:`_resolve_run` resolves one."""
    if not values or ctx.resilient_parsing:
        return values
    client = client_of(ctx)
    return [client.resolve_run_id(value) for value in values]


_RUN_HELP = "Run id, or its first 8 or more characters."
RunArg = Annotated[
    str, typer.Argument(metavar="RUN", help=_RUN_HELP, show_default=False, callback=_resolve_run)
]
OptionalRunArg = Annotated[
    str | None, typer.Argument(metavar="RUN", help=_RUN_HELP, show_default=False, callback=_resolve_run)
]
# metavar is the bare name: the usage line adds the brackets and dots (`[RUN]...`) itself.
RunsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="RUN",
        help="Run ids, or their first 8 or more characters.",
        show_default=False,
        callback=_resolve_runs,
    ),
]
FullOpt = Annotated[bool, typer.Option("--full", help="Show long values whole instead of cut short.")]


def confirm(question: str, yes: bool) -> None:
    """Ask unless ``--yes``; declining ends the command with exit code 1."""
    from reflexr_graph.cli.failures import CommandFailed

    if yes:
        return
    if not typer.confirm(question, default=False):
        raise CommandFailed("cancelled: nothing was changed (pass --yes to skip this question)")
