"""Waiting on conditions, never on fixed sleeps: one helper for every test
(reflexr_graph.local_processes.wait_for, failing the test at its deadline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from reflexr_graph import local_processes

T = TypeVar("T")

POLL_S = local_processes.POLL_S


def wait_for(
    condition: Callable[[], T],
    timeout: float = 30.0,
    what: str = "condition",
    poll_s: float = POLL_S,
    explain: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition()`` until it returns something truthy, and return that; fail at the deadline,
    with what ``explain()`` says of the state then, when given."""
    value = local_processes.poll_until(condition, timeout, poll_s)
    if value is None:
        detail = f": {explain()}" if explain is not None else ""
        pytest.fail(local_processes.timed_out(timeout, what) + detail)
    return value
