"""``serve``: the HTTP API and the web console."""

from __future__ import annotations

from typing import Annotated

import typer

from reflexr_graph.cli.app import app
from reflexr_graph.cli.failures import EXIT_CANNOT_LISTEN, CliError
from reflexr_graph.config.settings import load_settings
from reflexr_graph.errors import CannotListen


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host", metavar="HOST", help="Address to listen on (not loopback: needs REFLEXR_API_TOKEN)."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, metavar="PORT")] = 8080,
) -> None:
    """Serve the HTTP API (/api, /openapi.json) and the web console (/) until Ctrl-C.

    Every /api route needs `Authorization: Bearer <token>`: REFLEXR_API_TOKEN (at least 32
    characters), or, without it, a token generated at start and printed once with the console's
    URL (only a loopback address is served then). REFLEXR_API_HOSTS names the Host values it
    answers besides its address. Exits 4 when it cannot listen on the address (a port in use,
    say), before it prints anything.
    """
    from reflexr_graph.api.serve import serve as run_server

    redis_url = getattr(ctx.find_root().obj, "redis_url", None)
    settings = load_settings(strict=False, **({"redis_url": redis_url} if redis_url else {}))
    try:
        run_server(settings, host=host, port=port)
    except CannotListen as exc:
        raise CliError(str(exc), exit_code=EXIT_CANNOT_LISTEN) from None
