"""Reading JSON arguments given inline (``'{"a": 1}'``) or from a file (``@path``, ``@-`` for stdin)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from reflexr_graph import errors
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.core.tags import Tags, parse_tags


def _read(source: str, option: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{option}: file {source!r} does not exist; give an existing path after '@'") from None
    except IsADirectoryError:
        raise BadInput(f"{option}: {source!r} is a directory; give a JSON file after '@'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{option}: cannot read {source!r} ({type(exc).__name__}); check the file") from None


def parse_json(value: str, option: str) -> Any:
    """The JSON value of an option given as JSON text or ``@file``; BadInput says what to fix.

    Error messages give the position of a syntax error, never the text found there.
    """
    raw = _read(value[1:], option) if value.startswith("@") else value
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        where = "the file" if value.startswith("@") else "the argument"
        raise BadInput(
            f"{option}: {where} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f'quote the JSON for your shell, e.g. {option} \'{{"name": "..."}}\', or use @file.json'
        ) from None


def parse_tag_options(values: list[str] | None) -> Tags:
    """The ``--tag KEY=VALUE`` options as checked tags; BadInput says what to fix."""
    try:
        return parse_tags(values)
    except errors.InvalidInputs as exc:
        raise BadInput(f"--tag: {exc.errors[0]['msg']}") from None
