"""OTEL_* decides whether anything is exported; with nothing configured nothing is installed."""

from __future__ import annotations

import pytest

from reflexr_graph import telemetry


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, False, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_METRICS_EXPORTER": "none"}, True, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}, False, False),
    ],
)
def test_what_the_environment_asks_for(env: dict[str, str], traces: bool, metrics: bool) -> None:
    assert telemetry._wants("traces", env) is traces
    assert telemetry._wants("metrics", env) is metrics
