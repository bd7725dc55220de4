"""The field texts of ``history`` (and of the console's timeline, which follows the same rules)."""

from __future__ import annotations

from reflexr_graph.cli import history
from reflexr_graph.model import RunEvent

AT = 1_796_139_370.0
"""An event's time (epoch seconds): 2026-12-01 15:36:10 UTC."""


def _details(kind: str, **fields: str) -> str:
    return history.details(RunEvent(id="1-0", type=kind, at=AT, fields=fields))


def test_a_wait_for_a_worker_says_until_when_as_a_time_not_epoch_milliseconds() -> None:
    assert (
        _details("waiting_for_worker", graph="g", until="1796139375000")
        == "graph=g, until 15:36:15.000 (in 5.0s)"
    )


def test_times_and_durations_read_as_such_and_empty_fields_are_left_out() -> None:
    assert _details("run_waiting", attempt="2", signal="go", wake_at="") == "attempt=2, signal=go"
    assert _details("run_retrying", due_at="1796139370250") == "due 15:36:10.250 (in 250ms)"
    assert _details("limit_waited", node="n", waited_ms="3020", key="k") == "node=n, waited 3.0s, key=k"
    retried = _details("call_retried", node="n", call="model", error_type="ModelHTTPError", delay_ms="250")
    assert retried == "node=n, call=model, error_type=ModelHTTPError, next try in 250ms"


def test_a_wait_for_children_a_version_or_a_limit_says_so_not_signal_equals() -> None:
    assert _details("run_waiting", attempt="1", signal="child:r-1", wake_at="") == "attempt=1, child r-1"
    assert _details("run_waiting", attempt="1", signal="children:3", wake_at="") == "attempt=1, 3 children"
    assert _details("run_waiting", attempt="2", signal="version:v7", wake_at="") == "attempt=2, version v7"
    assert _details("run_waiting", attempt="2", signal="limit:llm", wake_at="") == "attempt=2, limit llm"
