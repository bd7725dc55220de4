"""The ``reflexr-graph`` command line (also ``python -m reflexr_graph``).

Exit codes: 0 success; 1 a run ended dead or cancelled, or a command failed; 2 bad usage or
bad input (malformed JSON, unknown graph or run, invalid inputs, an operation the run's
status does not allow).
"""

from __future__ import annotations

import sys

from reflexr_graph import errors
from reflexr_graph.cli import commands, dlq, health, watch
from reflexr_graph.cli import quarantine as quarantine  # registers `dlq messages`
from reflexr_graph.cli.app import app
from reflexr_graph.cli.failures import EXIT_FAILED, EXIT_USAGE, CliError
from reflexr_graph.cli.render import err
from reflexr_graph.schemas import format_loc

__all__ = ["app", "commands", "dlq", "health", "main", "watch"]

_USAGE_ERRORS = (
    errors.RunNotFound,
    errors.UnknownGraph,
    errors.InvalidInputs,
    errors.SettingsError,
)
"""Bad usage or bad input (exit 2). A refused operation, such as replaying a running run, is a
command that failed (exit 1): the input was fine, the run's status did not allow it."""


def _report(exc: Exception) -> int:
    """Print what went wrong and what to do; return the exit code."""
    if isinstance(exc, CliError):
        err.print(f"error: {exc}", markup=False)
        return exc.exit_code
    if isinstance(exc, errors.InvalidInputs) and exc.errors:
        err.print("error: invalid inputs; fix these fields:", markup=False)
        for item in exc.errors:
            loc = item.get("loc", [])
            where = format_loc(loc if isinstance(loc, list) else [loc])
            err.print(f"  {where}: {item.get('msg', 'is invalid')}", markup=False)
        return EXIT_USAGE
    if isinstance(exc, _USAGE_ERRORS):
        err.print(f"error: {exc}", markup=False)
        return EXIT_USAGE
    err.print(f"error: {exc}", markup=False)
    return EXIT_FAILED


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with its code (0 ok, 1 failed, 2 bad usage or input).

    typer reports usage errors itself (exit 2); errors the commands raise are reported here.
    """
    try:
        app(args=argv, prog_name="reflexr-graph")
    except (CliError, errors.ReflexrError) as exc:
        sys.exit(_report(exc))
