"""The names users and outside checks rely on (docs/design.md#names-users-rely-on)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import reflexr_graph
from reflexr_graph import (
    AsyncClient,
    CheckpointDetail,
    CheckpointInfo,
    Client,
    GraphAction,
    RunFailure,
    RunInfo,
    current_run,
)


def test_top_level_names() -> None:
    for name in ("GraphAction", "current_run", "RunFailure", "Client", "AsyncClient", "RunInfo"):
        assert hasattr(reflexr_graph, name), name
    assert set(inspect.signature(GraphAction).parameters) >= {"graph", "name", "input_types", "max_attempts"}
    failure = RunFailure("bad document", reason="bad_document", permanent=True)
    assert (failure.reason, failure.permanent, str(failure)) == ("bad_document", True, "bad document")
    assert callable(current_run)


def test_client_methods() -> None:
    for cls in (Client, AsyncClient):
        for method in ("enqueue", "get", "wait", "replay", "cancel", "dead_letters"):
            assert callable(getattr(cls, method)), f"{cls.__name__}.{method}"
    assert set(inspect.signature(Client.enqueue).parameters) >= {
        "graph",
        "inputs",
        "state",
        "idempotency_key",
    }
    assert "from_start" in inspect.signature(Client.replay).parameters
    assert callable(Client.from_url)


def test_run_info_fields() -> None:
    expected = {"run_id", "graph", "status", "attempts", "max_attempts", "output", "error", "reason",
                "next_node", "checkpoints", "created_at", "updated_at"}  # fmt: skip
    # The fields the design fixes are all there; issue 14 added the attempts that did not count
    # (interruptions), the boundaries not checkpointed, the replays, (issue 9) the work reused, and
    # (issue 10) what a waiting run waits for, (issue 11) a fork's lineage, and (issue 13) its waits
    # for limits and its priority; issue 25 the attempt's number and the attempts that ended waiting,
    # and a cooperative cancel not reached yet; issue 23 the run's tags, its parent and its
    # children; issue 20 the graph version the run is pinned to, and the one an upgrade moves it to.
    assert set(RunInfo.model_fields) == expected | {
        "interruptions", "skipped_boundaries", "replays", "reused_steps", "reused_calls",
        "waiting_for", "wake_at", "forked_from", "forked_at_seq", "limit_waits", "limit_wait_s", "priority",
        "attempt", "suspensions", "cancel_requested", "tags", "version", "parent_run_id", "children",
        "upgrade_to", "upgrade_resumes", "last_failure",
    }  # fmt: skip
    # Issue 34: error and reason say what the run is now; an earlier attempt's failure is last_failure.
    assert set(reflexr_graph.LastFailure.model_fields) == {"attempt", "time", "reason", "error"}


def test_child_run_names() -> None:
    """Issue 23: child runs, made and waited for inside a step."""
    for name in ("run_child", "start_child"):
        params = inspect.signature(getattr(reflexr_graph, name)).parameters
        assert list(params) == ["graph", "inputs", "key", "tags"], name
        assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in ("key", "tags")), name
    waits = inspect.signature(reflexr_graph.wait_child).parameters
    assert list(waits) == ["run_id", "output_type"]
    assert waits["output_type"].kind is inspect.Parameter.KEYWORD_ONLY
    failed = reflexr_graph.ChildFailed(child_run_id="c", status="dead", reason="r")
    assert (failed.child_run_id, failed.status, failed.child_reason) == ("c", "dead", "r")
    assert isinstance(failed, RunFailure) and failed.error_kind == "failed"


def test_cancel_names() -> None:
    """Issue 25: cancel is cooperative; ``now`` interrupts the step, on both clients."""
    for cls in (Client, AsyncClient):
        now = inspect.signature(cls.cancel).parameters["now"]
        assert (now.kind, now.default) == (inspect.Parameter.KEYWORD_ONLY, False)


def test_time_travel_names() -> None:
    """Issue 11: the checkpoint history and forks, on both clients."""
    for cls in (Client, AsyncClient):
        assert list(inspect.signature(cls.checkpoints).parameters) == ["self", "run_id"]
        assert list(inspect.signature(cls.checkpoint).parameters) == ["self", "run_id", "seq"]
        fork = inspect.signature(cls.fork).parameters
        named = ["from_seq", "state", "patch", "priority", "idempotency_key"]
        assert list(fork) == ["self", "run_id", *named]
        assert all(fork[p].kind is inspect.Parameter.KEYWORD_ONLY for p in named)
        check = inspect.signature(cls.check_fork).parameters
        assert list(check) == ["self", "run_id", "from_seq", "state", "patch"]
        assert "from_seq" in inspect.signature(cls.replay).parameters
    assert set(CheckpointInfo.model_fields) == {"seq", "saved_at", "next_node", "size", "attempt", "finished"}
    assert {"state", "inputs", "next_inputs", "output"} <= set(CheckpointDetail.model_fields)
    for name in ("CheckpointInfo", "CheckpointDetail", "CheckpointNotFound", "StaleCheckpoint"):
        assert hasattr(reflexr_graph, name), name


def test_step_control_names() -> None:
    """Issue 13: timeouts, retry policies, limits and priorities, as the brief names them."""
    assert set(inspect.signature(GraphAction).parameters) >= {
        "step_timeouts", "default_step_timeout", "attempt_timeout", "retry", "step_retries", "limits",
    }  # fmt: skip
    policy = inspect.signature(reflexr_graph.RetryPolicy).parameters
    assert list(policy) == ["max_attempts", "backoff_s", "backoff_max_s", "non_retryable"]
    assert list(inspect.signature(reflexr_graph.Limit).parameters)[:3] == ["key", "rate", "concurrency"]
    assert RunFailure("429", retry_after=2.5).retry_after == 2.5
    assert reflexr_graph.StepTimeout(node="n", timeout_s=1).reason == "step_timeout"
    for cls in (Client, AsyncClient):
        assert "priority" in inspect.signature(cls.enqueue).parameters


def test_waiting_names() -> None:
    """Issue 10: the waits a step makes, the signals a client sends, and the status in between."""
    assert inspect.signature(reflexr_graph.wait_for_signal).parameters.keys() >= {"name", "type_", "timeout"}
    assert callable(reflexr_graph.sleep)
    assert "signals" in inspect.signature(GraphAction).parameters
    assert issubclass(reflexr_graph.SignalTimeout, TimeoutError)
    assert reflexr_graph.Status("waiting") is reflexr_graph.Status.WAITING
    for cls in (Client, AsyncClient):
        assert list(inspect.signature(cls.signal).parameters)[1:4] == ["run_id", "name", "value"]


def test_importing_the_package_does_not_load_celery() -> None:
    """Building GraphActions needs no Celery: the clients load it on first use."""
    code = "import sys, reflexr_graph; print('celery' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_module_entry_point() -> None:
    """`python -m reflexr_graph` is the CLI."""
    out = subprocess.run([sys.executable, "-m", "reflexr_graph", "--help"], capture_output=True, text=True,
                         timeout=60, check=True)  # fmt: skip
    assert "dlq" in out.stdout and "enqueue" in out.stdout


def test_call_retry_names() -> None:
    """Issue 34: per-call retries, on durable_call and on a durable agent's model requests."""
    policy = inspect.signature(reflexr_graph.CallRetry).parameters
    assert list(policy) == ["max_attempts", "backoff_s", "backoff_max_s", "non_retryable"]
    retry = inspect.signature(reflexr_graph.durable_call).parameters["retry"]
    assert (retry.kind, retry.default) == (inspect.Parameter.KEYWORD_ONLY, None)
    from reflexr_graph.ai import durable_agent

    assert inspect.signature(durable_agent).parameters["model_retry"].default is None
