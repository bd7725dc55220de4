"""A failed attempt's traceback as its reader wants it: the user's frames, with the framework's
between them folded.

A step's error passes through some twenty frames of Celery, the attempt driver, pydantic-graph and
asyncio before the step's own; ``dlq show`` and the console's traceback box (which both show the
traceback recorded here, fleet/redaction.py) opened with all of them. Each run of consecutive
framework frames becomes one line, ``... 21 framework frames (asyncio, celery, reflexr_graph)``,
so the first frame shown in full is the user's. A traceback of framework frames only (an error
of ours, not of a step) is kept whole: then they are the story.
"""

from __future__ import annotations

import sysconfig
import traceback
from types import FrameType, TracebackType

FRAMEWORK = frozenset(
    {
        "billiard", "celery", "kombu", "vine", "redis", "anyio", "pydantic", "pydantic_core",
        "pydantic_graph", "pydantic_ai", "reflexr_graph", "opentelemetry", "logfire",
    }
)  # fmt: skip
"""Top-level packages whose frames are folded, by module name, not by path: a user's project
installed as a wheel lives in site-packages too, and its frames are the ones to show."""
_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
"""The standard library's frames (asyncio's event loop, contextlib, threading) are folded too."""
_INSTALLED = ("site-packages", "dist-packages")


def framework_package(frame: FrameType) -> str | None:
    """The framework package ``frame`` runs in (``asyncio`` for the standard library's), or None
    for the user's code."""
    module = str(frame.f_globals.get("__name__", ""))
    top = module.partition(".")[0]
    if top in FRAMEWORK:
        return top
    filename = frame.f_code.co_filename
    if filename.startswith(_STDLIB) and not any(part in filename for part in _INSTALLED):
        return top or "stdlib"
    return None


def format_tb(tb: TracebackType | None) -> list[str]:
    """``traceback.format_tb(tb)``, each run of framework frames folded into one line (unless no
    frame is the user's)."""
    walked = list(traceback.walk_tb(tb))
    packages = [framework_package(frame) for frame, _ in walked]
    summary = traceback.StackSummary.extract(iter(walked))
    if all(packages):
        return summary.format()
    lines: list[str] = []
    folded: list[str] = []
    for package, frame in zip(packages, summary, strict=True):
        if package is not None:
            folded.append(package)
            continue
        lines.extend(_fold(folded))
        folded = []
        lines.extend(traceback.StackSummary.from_list([frame]).format())
    return lines + _fold(folded)


def _fold(packages: list[str]) -> list[str]:
    if not packages:
        return []
    s = "" if len(packages) == 1 else "s"
    return [f"  ... {len(packages)} framework frame{s} ({', '.join(sorted(set(packages)))})\n"]
