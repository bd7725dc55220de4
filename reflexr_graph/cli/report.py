"""How a failed command ends: one line on stderr that says what to fix, and its exit code.

With ``--json`` that line is a JSON document instead, also on stderr, so stdout only ever
holds results: ``{"error": {"type": "StoreUnavailable", "kind": "refused", "message": "...",
"exit_code": 3}}`` (``kind`` for Redis errors, ``errors`` for invalid inputs). No traceback
is printed unless ``--debug`` is given.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic
import typer

from reflexr_graph import errors
from reflexr_graph.cli.failures import EXIT_FAILED, EXIT_TIMED_OUT, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from reflexr_graph.core import invalid
from reflexr_graph.errors import Kind
from reflexr_graph.store.connection_errors import URL_SETTING

EXIT_CODES: dict[Kind, int] = {
    Kind.NOT_FOUND: EXIT_USAGE,
    Kind.INVALID: EXIT_USAGE,
    Kind.CONFLICT: EXIT_FAILED,
    Kind.UNAVAILABLE: EXIT_UNREACHABLE,
    Kind.TIMEOUT: EXIT_TIMED_OUT,
    Kind.FAILED: EXIT_FAILED,
}
"""The exit code of each kind of error. A conflict (replaying a running run) is a command that
failed: the input was fine, the run's status did not allow it. A timeout (a ``--wait`` that gave
up while the run goes on) exits 124, as ``timeout(1)`` does."""
_MESSAGE_LIMIT = 300
"""Longest message of an unexpected error: one line, and a long one is likely to quote data."""


@dataclass(frozen=True)
class Problem:
    """What went wrong, as printed: the error's type, one line that says what to do, the exit code."""

    type: str
    message: str
    exit_code: int
    kind: str | None = None
    fields: list[dict[str, object]] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        body: dict[str, object] = {"type": self.type, "message": self.message, "exit_code": self.exit_code}
        if self.kind:
            body["kind"] = self.kind
        if self.fields:
            body["errors"] = self.fields
        return {"error": body}


def one_line(text: str) -> str:
    return " ".join(text.split())


_SUBJECTS = {"inputs": "inputs", "state": "state", "value": "signal value", "patch": "patch"}
"""What an invalid location's first part names: the message says what was invalid, by its option."""


def _invalid_inputs(exc: errors.InvalidInputs) -> Problem:
    subjects: list[str] = []
    for item in exc.errors:
        raw = item.get("loc", [])
        loc = raw if isinstance(raw, list) else [raw]
        subject = _SUBJECTS.get(str(loc[0]) if loc else "", "inputs")
        if subject not in subjects:
            subjects.append(subject)
    listed = invalid.describe(exc.errors)
    what = " and ".join(subjects) or "inputs"
    message = f"invalid {what}; fix these fields: {listed}" if listed else str(exc)
    return Problem(type(exc).__name__, one_line(message), EXIT_CODES[exc.error_kind], fields=exc.errors)


def parse_context(exc: BaseException) -> Any:
    """The click context of a command-line parsing error, or None for any other exception."""
    return getattr(exc, "ctx", None) if _parse_error_code(exc) is not None else None


def _parse_error_code(exc: BaseException) -> int | None:
    # Recognised by shape: typer has shipped click's exceptions and, later, a vendored copy
    # of them, and exports neither UsageError nor ClickException under one name.
    code = getattr(exc, "exit_code", None)
    if callable(getattr(exc, "format_message", None)) and isinstance(code, int):
        return code
    return None


def _parse_error(exc: BaseException, code: int) -> Problem:
    """A usage error (a missing option, a bad value...), or another click-style exception."""
    message = one_line(str(exc.format_message()))  # type: ignore[attr-defined]
    ctx = parse_context(exc)
    if code != EXIT_USAGE:
        return Problem(type(exc).__name__, message, code)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return Problem("UsageError", message + where, code)


def _unexpected(exc: BaseException) -> Problem:
    """A bug or an unforeseen failure: its type and first line, never a traceback by default."""
    # A ValidationError's own text quotes the invalid input; its summary names only where and why.
    said = invalid.summary(exc) if isinstance(exc, pydantic.ValidationError) else str(exc)
    lines = said.strip().splitlines()
    text = lines[0] if lines else ""
    if len(text) > _MESSAGE_LIMIT:
        text = text[:_MESSAGE_LIMIT] + "..."
    name = type(exc).__name__
    message = f"unexpected {name}{': ' + text if text else ''} (run again with --debug for the traceback)"
    return Problem(name, message, EXIT_FAILED)


def problem_of(exc: BaseException) -> Problem:
    """The Problem that reports ``exc``; every exception has one."""
    if isinstance(exc, CliError):
        return Problem(type(exc).__name__, one_line(str(exc)), exc.exit_code)
    if isinstance(exc, typer.Abort):
        message = "no answer to the question (input closed or interrupted); pass --yes to skip it"
        return Problem("Aborted", message, EXIT_FAILED)
    if isinstance(exc, errors.StoreUnavailable):
        return Problem(type(exc).__name__, one_line(str(exc)), EXIT_CODES[exc.error_kind], kind=exc.kind)
    if isinstance(exc, errors.InvalidInputs):
        return _invalid_inputs(exc)
    if isinstance(exc, errors.ReflexrError):
        return Problem(type(exc).__name__, one_line(str(exc)), EXIT_CODES[exc.error_kind])
    parse_code = _parse_error_code(exc)
    if parse_code is not None:
        return _parse_error(exc, parse_code)
    return _unexpected(exc)


def wants(flag: str, argv: Sequence[str]) -> bool:
    """Whether ``flag`` is on the command line (before a ``--``), even if parsing failed."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    return flag in args


def url_option(argv: Sequence[str]) -> str | None:
    """``--redis-url`` when the command line gives the Redis URL (before a ``--``), else None."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    given = any(arg == "--redis-url" or arg.startswith("--redis-url=") for arg in args)
    return "--redis-url" if given else None


def fail(exc: BaseException, *, as_json: bool, debug: bool, url_from: str | None = None) -> int:
    """Print ``exc`` as one line (or one JSON document) on stderr; return the exit code.

    ``url_from`` is the option the Redis URL came from, when not ``REFLEXR_REDIS_URL``: a message
    about the URL names what the user gave.
    """
    problem = problem_of(exc)
    if url_from is not None:
        problem = dataclasses.replace(problem, message=problem.message.replace(URL_SETTING, url_from))
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if as_json:
        print(json.dumps(problem.as_json(), default=str), file=sys.stderr)
    else:
        print(f"error: {problem.message}", file=sys.stderr)
    return problem.exit_code
