"""OpenTelemetry setup from the standard ``OTEL_*`` variables, for workers and producers.

With nothing configured, nothing is installed: the API's no-op tracer and meter stay in
place, so instrumentation costs nothing. When an OTLP endpoint or exporter is named,
traces and metrics go out over OTLP/HTTP; the exporters read the rest of ``OTEL_*``
(headers, protocol details, intervals) themselves.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

from opentelemetry import metrics, trace

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, object] = {}

DEFAULT_SERVICE = "reflexr-graph"


def _wants(kind: str, env: Mapping[str, str]) -> bool:
    """Whether ``traces`` or ``metrics`` should be exported, per the OTEL_* variables."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = env.get(f"OTEL_{kind.upper()}_EXPORTER")
    if exporter is not None:
        return exporter.strip().lower() not in ("", "none")
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{kind.upper()}_ENDPOINT")
    )


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Install OTLP exporting providers if ``OTEL_*`` asks for them; True when anything was installed.

    Safe to call more than once (each process configures itself once).
    """
    env = os.environ if env is None else env
    with _lock:
        if _state:
            return bool(_state.get("installed"))
        installed = False
        if _wants("traces", env):
            _install_traces()
            installed = True
        if _wants("metrics", env):
            _install_metrics()
            installed = True
        _state["installed"] = installed
        return installed


def _resource() -> object:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; ours is the fallback.
    return Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", DEFAULT_SERVICE)})


def _install_traces() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = _resource()
    assert isinstance(resource, Resource)
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state["tracer_provider"] = provider
    log.info("exporting traces over OTLP; spans are flushed at shutdown")


def _install_metrics() -> None:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    resource = _resource()
    assert isinstance(resource, Resource)
    provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())]
    )
    metrics.set_meter_provider(provider)
    _state["meter_provider"] = provider
    log.info("exporting metrics over OTLP")


def tracing_enabled() -> bool:
    """Whether spans go anywhere: an SDK provider was installed here or by the application."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def setup_process(env: Mapping[str, str] | None = None) -> None:
    """Configure exporters from OTEL_* and, when spans go anywhere, carry trace context in Celery messages.

    Without a tracer provider the Celery instrumentation would only add work, so it is left off.
    """
    configure(env)
    if tracing_enabled():
        instrument_celery()


def instrument_celery() -> None:
    """Propagate trace context through Celery messages (worker and producer sides), once per process."""
    with _lock:
        if _state.get("celery"):
            return
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument()
        _state["celery"] = True


def shutdown() -> None:
    """Flush and stop the exporters: called at worker shutdown so the last spans are not lost."""
    for key in ("tracer_provider", "meter_provider"):
        provider = _state.get(key)
        stop = getattr(provider, "shutdown", None)
        if stop is not None:
            stop()
