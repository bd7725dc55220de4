"""CLI failures and the exit codes they map to: 1 a failed run or command, 2 bad usage or input,
3 Redis cannot be reached or used with the URL given, 4 ``serve`` cannot listen on its address,
124 a ``--wait`` that timed out (the code ``timeout(1)`` uses) while the run goes on."""

from __future__ import annotations

from reflexr_graph.errors import Kind, ReflexrError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_CANNOT_LISTEN = 4
EXIT_TIMED_OUT = 124


class CliError(ReflexrError):
    """A message for stderr plus the exit code the command ends with (its own, not its kind's)."""

    error_kind = Kind.FAILED
    exit_code = EXIT_FAILED

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class BadInput(CliError):
    """The command line or its input is wrong; the message says what to fix (exit 2)."""

    error_kind = Kind.INVALID
    exit_code = EXIT_USAGE


class CommandFailed(CliError):
    """The command ran but did not succeed, or a run ended dead or cancelled (exit 1)."""

    exit_code = EXIT_FAILED
