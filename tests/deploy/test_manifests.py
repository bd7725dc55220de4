"""Static checks of deploy/: nothing there can run on CI (no Docker engine), so the files are
parsed and checked against the code they configure (Settings, queue names, metric names)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reflexr_graph.config.settings import ENV_PREFIX, Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose.yaml"
DASHBOARD = DEPLOY / "grafana" / "reflexr-dashboard.json"

# The OTel instruments the fleet exports, with the Prometheus suffix each gets through the
# collector's prometheus exporter (unit suffix, then _total for counters; histograms get
# _bucket/_sum/_count).
COUNTERS = (
    "reflexr.runs.started",
    "reflexr.runs.ended",
    "reflexr.attempts",
    "reflexr.dead_letters",
    "reflexr.runs.recovered",
)
HISTOGRAMS = {
    "reflexr.checkpoint.save.duration": "seconds",
    "reflexr.checkpoint.size": "bytes",
    "reflexr.step.duration": "seconds",
}


def prometheus_names() -> set[str]:
    names = {name.replace(".", "_") + "_total" for name in COUNTERS}
    for name, unit in HISTOGRAMS.items():
        base = f"{name.replace('.', '_')}_{unit}"
        names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return names


def valid_env_names() -> set[str]:
    return {ENV_PREFIX + field.upper() for field in Settings.model_fields}


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_docs() -> list[dict[str, Any]]:
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in yaml_docs(path)]


def k8s_kind(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in k8s_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name} in deploy/k8s, found {len(found)}"
    return found[0]


def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def compose_worker_env() -> dict[str, str]:
    env = compose()["services"]["worker"]["environment"]
    assert isinstance(env, dict), "keep the worker's environment a mapping"
    return {k: str(v) for k, v in env.items()}


def configmap_env() -> dict[str, str]:
    return dict(k8s_kind("ConfigMap", "reflexr-worker")["data"])


def worker_container() -> dict[str, Any]:
    spec = k8s_kind("Deployment", "reflexr-worker")["spec"]["template"]["spec"]
    containers: list[dict[str, Any]] = [c for c in spec["containers"] if c["name"] == "worker"]
    assert len(containers) == 1, "expected one container named worker"
    return containers[0]


def setting(env: dict[str, str], field: str) -> str:
    """The value ``env`` gives a setting, else the Settings default."""
    key = ENV_PREFIX + field.upper()
    return env[key] if key in env else str(Settings.model_fields[field].default)


def duration_s(text: str) -> float:
    """A compose duration such as ``40s``, ``1m30s`` or ``500ms`` in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"unparseable duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def parse_redis_conf(text: str) -> dict[str, str]:
    conf: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key.lower()] = value.strip().strip('"')
    return conf


def all_images() -> list[tuple[str, str]]:
    """(where, image) for every image the compose file and the k8s pod specs name."""
    found = [
        (f"compose:{name}", svc["image"]) for name, svc in compose()["services"].items() if "image" in svc
    ]
    for doc in k8s_docs():
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            found.append((f"k8s:{doc['kind']}/{doc['metadata']['name']}/{c['name']}", c["image"]))
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.upper().startswith("FROM "):
            found.append(("Dockerfile", line.split()[1]))
    return found


def test_every_yaml_and_json_file_parses() -> None:
    """A syntax error in any manifest (which nothing else here would run) fails CI."""
    files = sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml")) + sorted(DEPLOY.rglob("*.json"))
    assert len(files) >= 10
    for path in files:
        if path.suffix == ".json":
            json.loads(path.read_text())
        else:
            assert yaml_docs(path), f"{path} has no documents"


def test_images_are_named_and_pinned() -> None:
    """Every image has an explicit tag that is not ``latest``: deploys are reproducible."""
    images = all_images()
    assert any(where.startswith("k8s:") for where, _ in images)
    for where, image in images:
        name, sep, tag = image.rpartition("/")[2].partition(":")
        assert name and sep and tag, f"{where}: image {image!r} has no tag"
        assert tag != "latest", f"{where}: image {image!r} must not use :latest"


def test_every_reflexr_env_var_is_a_setting() -> None:
    """Every REFLEXR_* name anywhere in deploy/ is a Settings field: a worker refuses to start on
    an unknown one, and a renamed setting must not leave manifests setting a dead name."""
    valid = valid_env_names()
    seen: set[str] = set()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        for name in re.findall(r"\bREFLEXR_[A-Z0-9_]+\b", path.read_text()):
            seen.add(name)
            assert name in valid, f"{path.relative_to(DEPLOY)}: {name} is not a setting ({sorted(valid)})"
    assert {"REFLEXR_REDIS_URL", "REFLEXR_QUEUE", "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S"} <= seen


@pytest.mark.parametrize("source", ["compose", "configmap"])
def test_configured_settings_validate(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The values compose and the k8s ConfigMap set load as Settings (types, ranges, and the
    lease TTL / visibility timeout relation), so a worker with them would start."""
    env = compose_worker_env() if source == "compose" else configmap_env()
    values: dict[str, Any] = {
        k.removeprefix(ENV_PREFIX).lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX)
    }
    values.setdefault("redis_url", "redis://:secret@redis:6379/0")
    if "${" in values["redis_url"]:
        values["redis_url"] = "redis://:secret@redis:6379/0"  # compose interpolation
    for optional in ("graphs", "broker_url"):  # compose interpolation, empty by default
        if values.get(optional, "").startswith("${"):
            values[optional] = ""
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    Settings(**values)


def test_compose_worker_shuts_down_softly_within_its_grace_period() -> None:
    """SIGTERM is remapped to SIGQUIT (soft shutdown requeues a running message at once), and
    Docker waits longer than the soft shutdown timeout before its SIGKILL."""
    worker = compose()["services"]["worker"]
    env = compose_worker_env()
    assert env.get("REMAP_SIGTERM") == "SIGQUIT"
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    soft = float(setting(env, "soft_shutdown_timeout_s"))
    assert duration_s(worker["stop_grace_period"]) > soft


def test_compose_services() -> None:
    """Compose runs Redis with the repo's redis.conf on a volume, workers that wait for a healthy
    Redis, scale out, send OTLP to the collector, and the listed optional services."""
    services = compose()["services"]
    redis = services["redis"]
    assert "/usr/local/etc/redis/redis.conf" in redis["command"]
    assert any(str(v).startswith("./redis.conf:") for v in redis["volumes"])
    assert any(str(v).endswith(":/data") for v in redis["volumes"])
    assert "healthcheck" in redis
    worker = services["worker"]
    assert worker["build"]["dockerfile"] == "deploy/Dockerfile"
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert worker["deploy"]["replicas"] >= 2
    assert compose_worker_env()["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://otel-collector:")
    assert services["flower"]["profiles"] == ["ops"]
    assert services["prometheus"]["profiles"] == services["grafana"]["profiles"] == ["observability"]
    assert "jaeger" in services and "otel-collector" in services


def test_dockerfile_runs_the_worker_as_non_root_with_soft_shutdown() -> None:
    """The image remaps SIGTERM, stops with SIGTERM, runs as a non-root user, and its default
    command starts a worker on the configured queue with Celery as PID 1 (exec)."""
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^ENV REMAP_SIGTERM=SIGQUIT$", text, re.M)
    assert re.search(r"^STOPSIGNAL SIGTERM$", text, re.M)
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    assert re.search(r"pip install .*\.", text)
    entry = (DEPLOY / "docker-entrypoint.sh").read_text()
    assert 'celery -A reflexr_graph.worker worker --loglevel=INFO -Q "${REFLEXR_QUEUE:-reflexr}"' in entry
    assert 'exec "$@"' in entry


def test_the_image_holds_the_bundled_example_where_the_worker_looks() -> None:
    """The wheel installs ``reflexr_graph`` alone; the worker imports REFLEXR_GRAPHS from its working
    directory first (issue 34). So ``workers.examples.triage:triage``, the example the compose file
    and the ConfigMap name, is copied into the image's WORKDIR after the install, and never removed."""
    text = (DEPLOY / "Dockerfile").read_text()
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", text, re.M)
    copy = re.search(r"^COPY workers \./workers$", text, re.M)
    install = re.search(r"pip install --no-deps \.", text)
    assert copy and install and copy.start() > install.start(), "copied after the wheel is installed"
    removed = re.findall(r"rm -rf ([^\n]+)", text)
    assert not any(f"{workdir}/workers" in r for r in removed)
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "!workers/**" in ignore
    assert (DEPLOY.parent / "workers" / "examples" / "triage.py").is_file()
    for where in (COMPOSE.read_text(), (K8S / "configmap.yaml").read_text()):
        assert "workers.examples.triage:triage" in where


def test_k8s_worker_shuts_down_softly_within_its_grace_period() -> None:
    """The worker pod remaps SIGTERM and the kubelet waits longer than the soft shutdown
    timeout (from the ConfigMap, else the Settings default) before its SIGKILL."""
    container = worker_container()
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("REMAP_SIGTERM") == "SIGQUIT"
    pod = k8s_kind("Deployment", "reflexr-worker")["spec"]["template"]["spec"]
    soft = float(setting(configmap_env(), "soft_shutdown_timeout_s"))
    assert pod["terminationGracePeriodSeconds"] > soft


def test_k8s_worker_probes_resources_and_security() -> None:
    """The worker container has liveness and readiness probes, resource requests and limits,
    runs as non-root without privilege escalation, and reads its settings from the ConfigMap
    and the Redis URL from the Secret."""
    container = worker_container()
    for probe in ("livenessProbe", "readinessProbe"):
        assert container.get(probe), f"worker container lacks {probe}"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    pod = k8s_kind("Deployment", "reflexr-worker")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"configMapRef": {"name": "reflexr-worker"}} in container["envFrom"]
    (url,) = (e for e in container["env"] if e["name"] == "REFLEXR_REDIS_URL")
    assert url["valueFrom"]["secretKeyRef"]["name"] == "reflexr-redis"


def test_k8s_secret_example_uses_tls_and_auth() -> None:
    """The example Secret shows the rediss:// (TLS) URL with a password, and the key KEDA needs."""
    data = k8s_kind("Secret", "reflexr-redis")["stringData"]
    assert re.fullmatch(r"rediss://:[^@]+@[^:/]+:\d+/\d+", data["REFLEXR_REDIS_URL"])
    assert data["redis-password"]


def test_keda_scales_on_the_celery_queue_and_never_to_zero() -> None:
    """KEDA watches the Redis lists kombu keeps for the configured queue and the graphs' queues, and
    keeps at least one worker so the reaper (which lives in workers) always runs."""
    scaled = k8s_kind("ScaledObject", "reflexr-worker")["spec"]
    assert scaled["scaleTargetRef"]["name"] == "reflexr-worker"
    assert scaled["minReplicaCount"] >= 1
    assert scaled["maxReplicaCount"] >= scaled["minReplicaCount"]
    assert scaled["cooldownPeriod"] > 0
    base, *per_graph = scaled["triggers"]
    queue = setting(configmap_env(), "queue")
    assert base["metadata"]["listName"] == queue, "the base queue, where foreign producers send"
    assert per_graph, "one trigger per graph queue: the Client and the reaper send runs there"
    for trigger in (base, *per_graph):
        assert trigger["type"] == "redis" and int(trigger["metadata"]["listLength"]) >= 1
    assert all(t["metadata"]["listName"].startswith(f"{queue}.") for t in per_graph)
    trigger = base
    auth = k8s_kind("TriggerAuthentication", trigger["authenticationRef"]["name"])["spec"]
    (ref,) = auth["secretTargetRef"]
    assert ref["parameter"] == "password"
    assert ref["key"] in k8s_kind("Secret", ref["name"])["stringData"]


def test_compose_queue_matches_the_worker_queue() -> None:
    """The queue compose configures is the Settings default the entrypoint falls back to."""
    assert setting(compose_worker_env(), "queue") == Settings.model_fields["queue"].default


@pytest.mark.parametrize("where", ["deploy/redis.conf", "k8s ConfigMap"])
def test_redis_is_durable_and_never_evicts(where: str) -> None:
    """Redis persists every second to the AOF and refuses writes rather than evicting keys
    (G1 holds only while Redis keeps its data), in both the compose and the k8s config."""
    if where == "deploy/redis.conf":
        text = (DEPLOY / "redis.conf").read_text()
    else:
        text = k8s_kind("ConfigMap", "reflexr-redis-conf")["data"]["redis.conf"]
    conf = parse_redis_conf(text)
    assert conf["appendonly"] == "yes"
    assert conf["appendfsync"] == "everysec"
    assert conf["maxmemory-policy"] == "noeviction"
    assert conf["notify-keyspace-events"] == ""


def test_k8s_redis_statefulset_persists_to_a_volume() -> None:
    """The bundled Redis is a single primary whose /data is a PersistentVolumeClaim and whose
    config is the ConfigMap above."""
    sts = k8s_kind("StatefulSet", "redis")["spec"]
    assert sts["replicas"] == 1
    (claim,) = sts["volumeClaimTemplates"]
    (container,) = sts["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/data"] == claim["metadata"]["name"]
    assert "/usr/local/etc/redis/redis.conf" in container["args"]
    volumes = {v["name"]: v for v in sts["template"]["spec"]["volumes"]}
    assert volumes[mounts["/usr/local/etc/redis"]]["configMap"]["name"] == "reflexr-redis-conf"


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            exprs.append(query.get("query", ""))
    return exprs


def test_dashboard_queries_only_exported_metrics() -> None:
    """The Grafana dashboard parses, has typed panels, and queries only metric names the fleet
    exports (after Prometheus name mangling), covering each of them: a renamed metric fails here."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    assert dashboard["panels"]
    assert {p["type"] for p in dashboard["panels"]} <= {"timeseries", "stat", "heatmap"}
    known = prometheus_names()
    used: set[str] = set()
    for expr in dashboard_exprs(dashboard):
        for name in re.findall(r"\breflexr_[a-z0-9_]+", expr):
            if name in {"reflexr_graph", "reflexr_outcome", "reflexr_reason", "reflexr_node"}:
                continue  # labels (attributes), not metrics
            assert name in known, f"dashboard queries unknown metric {name}"
            used.add(name)
    bases = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in used}
    assert bases == {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in known}


def test_compose_rabbitmq_profile_holds_deliveries_longer_than_an_attempt() -> None:
    """The `rabbitmq` profile runs RabbitMQ with deploy/rabbitmq.conf, whose consumer_timeout is
    well above the longest attempt (30 min by default would close a busy worker's channel), and
    the workers take the broker URL from REFLEXR_BROKER_URL, empty (Redis) by default."""
    rabbit = compose()["services"]["rabbitmq"]
    assert rabbit["profiles"] == ["rabbitmq"]
    assert any(str(v).startswith("./rabbitmq.conf:/etc/rabbitmq/conf.d/") for v in rabbit["volumes"])
    conf = dict(
        line.split(" = ", 1)
        for line in (DEPLOY / "rabbitmq.conf").read_text().splitlines()
        if " = " in line and not line.startswith("#")
    )
    assert int(conf["consumer_timeout"]) >= 2 * 3600 * 1000
    assert conf["default_queue_type"] == "quorum"
    assert compose_worker_env()["REFLEXR_BROKER_URL"] == "${REFLEXR_BROKER_URL:-}"
