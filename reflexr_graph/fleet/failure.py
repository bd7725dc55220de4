"""How a failed attempt is recorded: its reason code, whether it is final, whether it counts.

The exception an attempt ended with decides it, before the node's retry policy has its say
(core/policy.py, applied by the recorder): a ``RunFailure`` carries its own reason and
permanence, inputs that do not validate are permanent, and an unreachable Redis is the
infrastructure's failure, not the step's, so it does not count toward ``max_attempts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reflexr_graph.errors import InvalidInputs, RunFailure, StoreUnavailable
from reflexr_graph.model import Reason


@dataclass(frozen=True)
class Failure:
    """How a failed attempt is recorded: its reason code, whether it is final, whether it counts."""

    reason: str
    permanent: bool = False
    counted: bool = True
    """False for an infrastructure failure: an interruption, not one of max_attempts."""


def classify(exc: BaseException) -> Failure:
    """How the failure ``exc`` is recorded."""
    if isinstance(exc, RunFailure):
        return Failure(exc.reason, exc.permanent)
    if isinstance(exc, InvalidInputs):
        return Failure(Reason.INVALID_INPUTS.value, permanent=True)
    if isinstance(exc, StoreUnavailable):
        # Redis, not the step, failed: the step gets its attempt back.
        return Failure(Reason.STORE_UNAVAILABLE.value, counted=False)
    return Failure(Reason.STEP_FAILED.value)
