"""In-memory OpenTelemetry for the whole test session: global providers can be set once per process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SPANS = InMemorySpanExporter()
METRICS = InMemoryMetricReader()
_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[METRICS]))
    _installed = True


def metric_total(name: str, **attrs: Any) -> float:
    """The current value of a counter (or a histogram's count), summed over points matching ``attrs``."""
    data = METRICS.get_metrics_data()
    total = 0.0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    total += sum(_value(p) for p in metric.data.data_points if _matches(p.attributes, attrs))
    return total


def _matches(point: Mapping[str, Any] | None, attrs: Mapping[str, Any]) -> bool:
    point = point or {}
    return all(point.get(k.replace("__", ".")) == v for k, v in attrs.items())


def _value(point: Any) -> float:
    return float(point.value) if hasattr(point, "value") else float(point.count)
