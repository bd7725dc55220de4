"""Span names and attributes. The OpenTelemetry API is a no-op until an SDK is configured.

A no-op span still costs its context switch and context manager on every step, so the
per-step span is only made where ``recording()`` says an SDK took the global provider.
"""

from __future__ import annotations

import json

from opentelemetry import propagate, trace
from opentelemetry.context import Context

TRACER = trace.get_tracer("reflexr_graph")

INVOKE_WORKFLOW = "invoke_workflow"
RECOVER_RUN = "recover_run"
"""The reaper's span for an attempt that died with its worker (its own span never ended)."""
ATTR_RUN_ID = "reflexr.run.id"
ATTR_GRAPH = "reflexr.graph"
ATTR_ATTEMPT = "reflexr.attempt"
ATTR_NODE = "reflexr.node"
ATTR_SEQ = "reflexr.checkpoint.seq"
EVENT_DISCARDED = "reflexr.checkpoint.discarded"
ATTR_DISCARD_REASON = "reflexr.checkpoint.reason"
ATTR_DISCARD_ERROR = "reflexr.checkpoint.error"
EVENT_RESUMED = "reflexr.checkpoint.resumed"
EVENT_SAVED = "reflexr.checkpoint.saved"
EVENT_STEP_REUSED = "reflexr.step.reused"
"""A branch step returned its recorded result instead of running (journal.py)."""
EVENT_CALL_REUSED = "reflexr.call.reused"
"""A durable call returned its recorded result instead of running."""
EVENT_SUSPENDED = "reflexr.run.suspended"
"""A step suspended the run to wait for a signal or a timer; the attempt ends with it."""
ATTR_SIGNAL = "reflexr.signal.name"
"""The signal waited for ('' for a durable sleep). Never its value."""
ATTR_WAKE_AT = "reflexr.wait.wake_at_ms"
ATTR_REUSED = "reflexr.step.reused"
ATTR_CALL = "reflexr.call.name"
ATTR_LIMIT_KEY = "reflexr.limit.key"


def recording() -> bool:
    """Whether an OpenTelemetry SDK (any provider but the API's proxy or no-op one) is installed.

    Asked once per attempt (core/driver.py), not once for all: a provider can be installed
    after this module is imported. Asking costs a lookup in the environment (about 3 µs).
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def run_trace_parent(trace_context: str) -> Context | None:
    """The context of the run's trace, from the W3C headers recorded at enqueue; None if there are none.

    Every attempt's ``invoke_workflow`` span is parented on it, so a retried or resumed
    attempt, even one the reaper re-sent, lands in the same trace as the run.
    """
    if not trace_context:
        return None
    try:
        carrier = json.loads(trace_context)
    except ValueError:
        return None  # a malformed record must not fail the attempt; it starts a trace of its own
    if not isinstance(carrier, dict) or not all(isinstance(v, str) for v in carrier.values()):
        return None
    return propagate.extract(carrier)


def current_trace_context() -> str:
    """The current trace as W3C headers in JSON, to record with a new run; '' outside any trace."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return json.dumps(carrier, separators=(",", ":")) if carrier else ""


def step_span_name(node_id: str) -> str:
    return f"execute_step {node_id}"
