"""``token``: make the lines of a REFLEXR_API_TOKENS file (named tokens and their roles)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from reflexr_graph.api.tokens import new_line, token_hash
from reflexr_graph.cli.app import Group, app
from reflexr_graph.cli.failures import BadInput

token_app = typer.Typer(
    help="API tokens: make a line of the REFLEXR_API_TOKENS file, or hash a token.",
    cls=Group,
    no_args_is_help=True,
)
app.add_typer(token_app, name="token")


@token_app.command("new")
def new(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Recorded as 'by' on what the token does.")],
    role: Annotated[str, typer.Argument(metavar="ROLE", help="viewer, operator or admin.")],
) -> None:
    """Make a random token for NAME with ROLE: print its REFLEXR_API_TOKENS line on stdout, and the
    token itself once on stderr (give it to its holder; only its hash is kept)."""
    token, line = new_line(name, role)
    typer.echo(f"token for {name} (shown once, keep it secret): {token}", err=True)
    typer.echo(line)


@token_app.command("hash")
def hash_token() -> None:
    """Print the SHA-256 (hex) of a token read from stdin, as a REFLEXR_API_TOKENS line holds it
    (read from stdin so that it is never in a shell's history or the process list)."""
    token = sys.stdin.readline().strip()
    if not token:
        raise BadInput('no token on stdin: pipe it in, e.g. printf %s "$TOKEN" | reflexr-graph token hash')
    typer.echo(token_hash(token))
