"""reflexr-graph: durable execution for pydantic-graph workflows on Celery and Redis."""

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.context import CurrentRun, current_run
from reflexr_graph.errors import (
    GraphDefinitionError,
    InvalidInputs,
    OperationRefused,
    ReflexrError,
    RunFailure,
    RunNotFound,
    UnknownGraph,
    WaitTimeout,
)
from reflexr_graph.model import RunInfo, Status

__all__ = [
    "CurrentRun",
    "GraphAction",
    "GraphDefinitionError",
    "InvalidInputs",
    "OperationRefused",
    "ReflexrError",
    "RunFailure",
    "RunInfo",
    "RunNotFound",
    "Status",
    "UnknownGraph",
    "WaitTimeout",
    "current_run",
]
