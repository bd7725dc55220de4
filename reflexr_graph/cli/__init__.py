"""The ``reflexr-graph`` command line (also ``python -m reflexr_graph``).

Exit codes: 0 success; 1 a run ended dead or cancelled, or a command failed (an operation
the run's status does not allow, an unexpected error); 2 bad usage or bad input (malformed
JSON, unknown graph or run, invalid inputs); 3 Redis cannot be reached or used with the URL
given (down, timing out, wrong password, database or TLS, not a Redis server); 124 a --wait
that timed out while the run goes on. Every failure is one line on stderr (JSON with
``--json``), never a traceback unless ``--debug``.
"""

from __future__ import annotations

import sys

from reflexr_graph.cli import (
    audit,
    commands,
    dlq,
    events,
    health,
    limits,
    publish,
    quarantine,
    rekey,
    report,
    schedules,
    serve,
    signals,
    stream,
    time_travel,
    tokens,
    top,
    versions,
    watch,
    workers,
)
from reflexr_graph.cli.app import app
from reflexr_graph.cli.failures import EXIT_OK, EXIT_USAGE

__all__ = [
    "app", "audit", "commands", "dlq", "events", "health", "limits", "main", "publish", "quarantine", "rekey",
    "run", "schedules", "serve", "signals", "stream", "time_travel", "tokens", "top", "versions",
    "watch",
    "workers",
]  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return its exit code.

    Parsing runs in click's non-standalone mode, so usage errors, errors the commands raise
    and unexpected ones are all reported here the same way.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = app(args=args, prog_name="reflexr-graph", standalone_mode=False)
    except Exception as exc:  # every failure ends as one line; --debug adds the traceback
        ctx = report.parse_context(exc)
        if ctx is not None and type(exc).__name__ == "NoArgsIsHelpError":
            # `reflexr-graph` or `reflexr-graph dlq` alone: the help is the answer.
            print(ctx.get_help())
            return EXIT_USAGE
        return report.fail(
            exc,
            as_json=report.wants("--json", args),
            debug=report.wants("--debug", args),
            url_from=report.url_option(args),
        )
    return result if isinstance(result, int) else EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with its code (0 ok, 1 failed, 2 bad usage or input, 3 Redis unreachable,
    124 a --wait timed out)."""
    sys.exit(run(argv))
