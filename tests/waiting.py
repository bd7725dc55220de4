"""Waiting on conditions, never on fixed sleeps: one helper for every test."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

POLL_S = 0.02


def wait_for(
    condition: Callable[[], T], timeout: float = 30.0, what: str = "condition", poll_s: float = POLL_S
) -> T:
    """Poll ``condition()`` until it returns something truthy, and return that; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll_s)
