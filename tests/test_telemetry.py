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


_PROBE = """
from opentelemetry import metrics, trace
from reflexr_graph import telemetry
telemetry.setup_process()
print(type(trace.get_tracer_provider()).__name__, type(metrics.get_meter_provider()).__name__,
      telemetry._state.get("celery", False))
telemetry.shutdown()
"""


def _probe(env: dict[str, str]) -> str:
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_nothing_is_installed_when_nothing_is_configured() -> None:
    """No OTEL_* variables: the API's no-op providers stay, and Celery is not instrumented."""
    assert _probe({}) == "ProxyTracerProvider _ProxyMeterProvider False"


def test_an_otlp_endpoint_installs_exporting_providers_and_celery_instrumentation() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT set: SDK providers export over OTLP and Celery carries trace context."""
    # Port 9 (discard) on loopback: nothing listens, so the flush at shutdown fails fast and quietly.
    out = _probe({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert out == "TracerProvider MeterProvider True"
