"""reflexr-graph: durable execution for pydantic-graph workflows on Celery and Redis."""

from typing import TYPE_CHECKING, Any

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.call_retry import CallRetry
from reflexr_graph.core.children import run_child, start_child, wait_child
from reflexr_graph.core.context import CurrentRun, current_run
from reflexr_graph.core.durable import durable_call
from reflexr_graph.core.emit import emit
from reflexr_graph.core.limits import Limit
from reflexr_graph.core.policy import RetryPolicy
from reflexr_graph.core.waits import sleep, wait_for_signal
from reflexr_graph.errors import (
    AttemptTimeout,
    CheckpointNotFound,
    ChildFailed,
    DurabilityWarning,
    GraphDefinitionError,
    IdempotencyConflict,
    InvalidInputs,
    OperationRefused,
    ReflexrError,
    RunFailure,
    RunNotFound,
    SignalPending,
    SignalTimeout,
    StaleCheckpoint,
    StepTimeout,
    StreamFull,
    UnknownGraph,
    UnknownSignal,
    WaitTimeout,
)
from reflexr_graph.model import CheckpointDetail, CheckpointInfo, LastFailure, RunInfo, Status, StreamItem

if TYPE_CHECKING:
    from reflexr_graph.client import AsyncClient, Client


def __getattr__(name: str) -> Any:
    # The clients bring Celery and redis-py in: loaded on first use, so `import reflexr_graph`
    # stays light for code that only builds GraphActions.
    if name in ("Client", "AsyncClient"):
        from reflexr_graph import client

        return getattr(client, name)
    raise AttributeError(f"module 'reflexr_graph' has no attribute {name!r}")


__all__ = [
    "AsyncClient",
    "AttemptTimeout",
    "CallRetry",
    "CheckpointDetail",
    "CheckpointInfo",
    "CheckpointNotFound",
    "ChildFailed",
    "Client",
    "CurrentRun",
    "DurabilityWarning",
    "GraphAction",
    "GraphDefinitionError",
    "IdempotencyConflict",
    "InvalidInputs",
    "LastFailure",
    "Limit",
    "OperationRefused",
    "ReflexrError",
    "RetryPolicy",
    "RunFailure",
    "RunInfo",
    "RunNotFound",
    "SignalPending",
    "SignalTimeout",
    "StaleCheckpoint",
    "Status",
    "StepTimeout",
    "StreamFull",
    "StreamItem",
    "UnknownGraph",
    "UnknownSignal",
    "WaitTimeout",
    "current_run",
    "durable_call",
    "emit",
    "run_child",
    "sleep",
    "start_child",
    "wait_child",
    "wait_for_signal",
]
