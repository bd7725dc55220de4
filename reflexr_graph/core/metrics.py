"""Metric instruments. Through the OpenTelemetry API they cost nothing until an SDK is configured.

Names are what dashboards and alerts rely on (deploy/grafana): keep them.
"""

from __future__ import annotations

from opentelemetry import metrics

METER = metrics.get_meter("reflexr_graph")

RUNS_STARTED = METER.create_counter("reflexr.runs.started", description="Runs whose first attempt started")
RUNS_ENDED = METER.create_counter(
    "reflexr.runs.ended", description="Runs that reached a terminal status, by outcome and reason"
)
ATTEMPTS = METER.create_counter(
    "reflexr.attempts",
    description="Attempts by how they ended: succeeded, failed, abandoned (the worker died), fenced",
)
DEAD_LETTERS = METER.create_counter("reflexr.dead_letters", description="Runs dead-lettered, by reason")
CHECKPOINT_SAVE = METER.create_histogram(
    "reflexr.checkpoint.save.duration", unit="s", description="Time to save one checkpoint (one round trip)"
)
CHECKPOINT_SKIPPED = METER.create_counter(
    "reflexr.checkpoint.skipped",
    description="Step boundaries not checkpointed, by node and reason (untyped, state, inputs, node_inputs)",
)
CHECKPOINT_SIZE = METER.create_histogram("reflexr.checkpoint.size", unit="By", description="Checkpoint size")
STEP_DURATION = METER.create_histogram("reflexr.step.duration", unit="s", description="Step duration by node")
RUNS_RECOVERED = METER.create_counter(
    "reflexr.runs.recovered", description="Runs the reaper re-enqueued after their lease lapsed"
)
QUARANTINED = METER.create_counter(
    "reflexr.queue.quarantined",
    description="Queue items a worker could not run and moved aside to the quarantine list, by reason",
)

RUNS_HELD_FOR_VERSION = METER.create_counter(
    "reflexr.runs.held_for_version",
    description="Runs that began to wait for a live worker of their graph version (G9), by version",
)
RUNS_UPGRADED = METER.create_counter(
    "reflexr.runs.upgraded",
    description="Runs an upgrade moved to a newer graph version (G9), by the version and outcome "
    "(resumed from their checkpoint, or restarted from their first step)",
)
RUNS_SUSPENDED = METER.create_counter(
    "reflexr.runs.suspended",
    description="Times a step suspended its run as waiting, by what it waits for (signal, timer)",
)
LIMIT_WAIT = METER.create_histogram(
    "reflexr.limit.wait.duration",
    unit="s",
    description="How long a limited step waited in place for its rate token or slot, by limit key",
)
LIMIT_DENIED = METER.create_counter(
    "reflexr.limit.denied", description="Acquisitions a limit refused (each one is a wait), by limit key"
)
LIMIT_IN_USE = METER.create_up_down_counter(
    "reflexr.limit.in_use", description="Concurrency slots held now, by limit key (summed over processes)"
)
CALL_RETRIES = METER.create_counter(
    "reflexr.call.retries",
    description="Durable calls tried again inside their step (CallRetry), by graph, node and call name",
)
ATTR_OUTCOME = "reflexr.outcome"
ATTR_WAIT = "reflexr.wait"
ATTR_REASON = "reflexr.reason"
ATTR_VERSION = "reflexr.graph.version"
