"""Settings, the graph registry, retry backoff and the Celery configuration: pure, no Redis."""

from __future__ import annotations

import asyncio
import os
import random
import ssl
from pathlib import Path

import pytest

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.config.settings import Settings, known_env_vars, load_settings
from reflexr_graph.core import backoff as retry
from reflexr_graph.errors import SettingsError
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.graph_registry import build_registry, resolve
from reflexr_graph.local_processes import environment
from tests.fleet.refs import good


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ.keys() - environment({}).keys():  # every REFLEXR_* variable
        monkeypatch.delenv(name)


# -- settings ---------------------------------------------------------------------------------


def test_defaults() -> None:
    """The documented defaults apply when no REFLEXR_* variable is set."""
    s = load_settings()
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert (s.queue, s.max_attempts, s.graphs) == ("reflexr", 5, ())
    assert (s.retry_backoff_s, s.retry_backoff_max_s) == (2.0, 300.0)
    assert (s.lease_ttl_s, s.visibility_timeout_s, s.soft_shutdown_timeout_s) == (30.0, 3600.0, 10.0)
    assert (s.run_retention_s, s.dead_retention_s) == (7 * 86400, 30 * 86400)


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every setting comes from its REFLEXR_ variable; GRAPHS is comma-separated."""
    monkeypatch.setenv("REFLEXR_GRAPHS", " a.b:c , d:e ,")
    monkeypatch.setenv("REFLEXR_LEASE_TTL_S", "3")
    monkeypatch.setenv("REFLEXR_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("REFLEXR_QUEUE", "q1")
    s = load_settings()
    assert s.graphs == ("a.b:c", "d:e")
    assert (s.lease_ttl_s, s.max_attempts, s.queue) == (3.0, 2, "q1")
    assert s.lease_ttl_ms == 3000


@pytest.mark.parametrize(
    "url",
    ["rediss://:s3cret@cache.example.com:6380/0", "redis://user:pw@127.0.0.1:6379/2", "redis://localhost"],
)
def test_tls_and_auth_urls_are_accepted(url: str) -> None:
    """rediss:// (TLS) and URLs with a password or user are valid."""
    assert load_settings(redis_url=url).redis_url == url


def test_unknown_reflexr_variable_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in a REFLEXR_ variable fails loudly, names it, suggests the setting and lists the known ones."""
    monkeypatch.setenv("REFLEXR_LEASE_TTL", "3")
    with pytest.raises(SettingsError) as err:
        load_settings()
    message = str(err.value)
    assert "REFLEXR_LEASE_TTL " in message and "REFLEXR_LEASE_TTL_S?" in message
    for name in known_env_vars():
        assert name in message


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"REFLEXR_MAX_ATTEMPTS": "0"}, "REFLEXR_MAX_ATTEMPTS"),
        ({"REFLEXR_LEASE_TTL_S": "0"}, "REFLEXR_LEASE_TTL_S"),
        ({"REFLEXR_RETRY_BACKOFF_S": "-1"}, "REFLEXR_RETRY_BACKOFF_S"),
        ({"REFLEXR_LEASE_TTL_S": "1000"}, "well below visibility_timeout_s"),
        (
            {"REFLEXR_RETRY_BACKOFF_S": "10", "REFLEXR_RETRY_BACKOFF_MAX_S": "5"},
            "REFLEXR_RETRY_BACKOFF_MAX_S",
        ),
        ({"REFLEXR_MAX_ATTEMPTS": "many"}, "REFLEXR_MAX_ATTEMPTS"),
    ],
)
def test_invalid_values_say_what_to_fix(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    """Invalid values raise SettingsError naming the variable (or the relation) to fix."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError, match=expected):
        load_settings()


def test_bad_url_scheme_does_not_echo_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL of another scheme is refused without printing its password."""
    monkeypatch.setenv("REFLEXR_REDIS_URL", "http://:hunter2@host/0")
    with pytest.raises(SettingsError, match="REFLEXR_REDIS_URL") as err:
        load_settings()
    assert "hunter2" not in str(err.value)


# -- registry ---------------------------------------------------------------------------------


def test_resolve_graph_action_and_bare_graph() -> None:
    """A reference to a GraphAction returns it; a bare pydantic_graph Graph is wrapped in one."""
    assert resolve("tests.fleet.refs.good:action") is good.action
    wrapped = resolve("tests.fleet.refs.good:bare")
    assert wrapped.name == "bare" and wrapped.graph is good.bare
    assert resolve("tests.fleet.refs.good:Holder.nested").name == "nested"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("tests.fleet.refs.good", "not of the form 'module:attribute'"),
        ("tests.fleet.refs.good:", "not of the form"),
        (":action", "not of the form"),
        ("a:b:c", "not of the form"),
        ("tests.fleet.refs.nope:action", "no module named 'tests.fleet.refs.nope'"),
        ("tests.fleet.refs.broken:x", "needs 'reflexr_graph_no_such_dependency', which is not installed"),
        ("tests.fleet.refs.raises:x", "raised RuntimeError: configuration missing"),
        ("tests.fleet.refs.good:missing", "has no attribute 'missing'"),
        ("tests.fleet.refs.good:not_a_graph", "names a int, not a GraphAction"),
    ],
)
def test_bad_references_are_settings_errors(ref: str, expected: str) -> None:
    """Each kind of bad reference raises SettingsError naming the reference and the problem."""
    with pytest.raises(SettingsError, match="graph reference") as err:
        resolve(ref)
    assert expected in str(err.value)


def test_a_missing_module_names_the_directories_searched() -> None:
    """A submodule is looked for in its package's directory, and the message says so (a top-level
    module in sys.path, the working directory first for a worker: tests/fleet/test_user_project.py)."""
    with pytest.raises(SettingsError) as err:
        resolve("tests.fleet.refs.nope:action")
    assert f"no module named 'tests.fleet.refs.nope'; searched {Path(good.__file__).parent};" in str(
        err.value
    )


def test_registry_rejects_two_graphs_with_one_name() -> None:
    """Two different graphs under one name are refused, naming both references."""
    with pytest.raises(SettingsError, match="two graphs are named 'doubler'") as err:
        build_registry(["tests.fleet.refs.good:action", "tests.fleet.refs.good:same_name"])
    assert "tests.fleet.refs.good:same_name" in str(err.value)


def test_a_conflict_with_an_action_passed_in_code_names_where_it_was_created() -> None:
    """An action given to build_registry in code has no reference: the error names the module and
    line that created it (not a made-up path such as reflexr_graph.core.action.doubler)."""
    line = next(
        n
        for n, text in enumerate(Path(good.__file__).read_text().splitlines(), 1)
        if text.startswith("same_name")
    )
    with pytest.raises(SettingsError, match="two graphs are named 'doubler'") as err:
        build_registry(["tests.fleet.refs.good:action"], [good.same_name])
    assert "('tests.fleet.refs.good:action' and " in str(err.value)
    assert f"GraphAction(...) in tests.fleet.refs.good, line {line})" in str(err.value)


def test_registry_keeps_the_same_action_listed_twice_once() -> None:
    """The same GraphAction named twice (in REFLEXR_GRAPHS and passed in code) is not a conflict."""
    registry = build_registry(["tests.fleet.refs.good:action", "tests.fleet.refs.good:bare"], [good.action])
    assert sorted(registry) == ["bare", "doubler"]
    assert registry["doubler"] is good.action


# -- retry ------------------------------------------------------------------------------------


def test_backoff_cap_doubles_until_the_maximum() -> None:
    """The cap is base * 2**(attempt-1), never above the maximum, and stays finite for huge attempts."""
    caps = [retry.backoff_cap_s(a, base_s=2.0, max_s=30.0) for a in range(1, 7)]
    assert caps == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert retry.backoff_cap_s(10_000, base_s=2.0, max_s=30.0) == 30.0


def test_backoff_is_full_jitter_and_seedable() -> None:
    """Delays are uniform in [0, cap]; the same seed gives the same delays."""
    delays = [retry.backoff_s(3, base_s=1.0, max_s=60.0, rng=random.Random(7)) for _ in range(3)]
    assert len(set(delays)) == 1
    rng = random.Random(1)
    spread = [retry.backoff_s(3, base_s=1.0, max_s=60.0, rng=rng) for _ in range(500)]
    assert all(0.0 <= d <= 4.0 for d in spread)
    assert min(spread) < 0.5 and max(spread) > 3.5
    assert retry.backoff_ms(1, base_s=1.0, max_s=1.0, rng=random.Random(3)) == int(
        random.Random(3).uniform(0, 1.0) * 1000
    )


# -- the Celery app -----------------------------------------------------------------------------


def test_celery_config_follows_the_design() -> None:
    """JSON only, late acks, requeue on a lost worker, prefetch 1, soft shutdown, and the
    transport options that bound recovery."""
    s = Settings(lease_ttl_s=3, visibility_timeout_s=3600, soft_shutdown_timeout_s=4, queue="q")
    conf = celery_config(s)
    assert conf["task_serializer"] == "json"
    assert conf["accept_content"] == conf["result_accept_content"] == ["json"]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["task_ignore_result"]
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["worker_soft_shutdown_timeout"] == 4
    assert not conf["worker_enable_soft_shutdown_on_idle"], "an idle worker has nothing to wait for"
    # Issue 14: a Redis blip must not cancel running attempts; their lease keeps them (see app.py).
    assert conf["worker_cancel_long_running_tasks_on_connection_loss"] is False
    assert conf["broker_connection_retry_on_startup"]
    assert conf["task_default_queue"] == "q"
    opts = conf["broker_transport_options"]
    assert opts["visibility_timeout"] == 3600
    assert opts["unacked_restore_throttle"] == 1
    assert 0 < opts["unacked_restore_interval"] <= 10
    assert {"socket_timeout", "socket_connect_timeout", "health_check_interval"} <= set(opts)
    assert conf["broker_use_ssl"] is None
    assert conf["broker_transport"] == "reflexr_graph.fleet.transport:Transport"
    assert conf["worker_consumer"] == "reflexr_graph.fleet.consumer:FleetConsumer"


def test_rediss_broker_verifies_certificates_unless_the_url_says_otherwise() -> None:
    """kombu would accept any certificate on rediss:// without options; the fleet requires one."""
    conf = celery_config(Settings(redis_url="rediss://:pw@host:6380/0"))
    assert conf["broker_use_ssl"] == {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    conf = celery_config(Settings(redis_url="rediss://host:6380/0?ssl_cert_reqs=CERT_OPTIONAL"))
    assert conf["broker_use_ssl"] is None


def test_app_registers_the_public_task_name() -> None:
    """The app has the task foreign producers send, under its public name."""
    app = create_app(Settings(), {"doubler": good.action})
    app.loader.import_default_modules()
    assert TASK_NAME == "reflexr_graph.run"
    assert TASK_NAME in app.tasks
    assert app.reflexr_registry == {"doubler": good.action}


def test_every_store_setting_reaches_the_stores_of_the_fleet_and_both_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36: the REFLEXR_* settings the store reads are mapped to its one StoreOptions value in
    one place (config/store.py): the worker's store reads payloads strictly, the clients' do not."""
    for name, value in (("RUN_RETENTION_S", 11), ("DEAD_RETENTION_S", 12), ("MAX_INTERRUPTIONS", 13)):
        monkeypatch.setenv(f"REFLEXR_{name}", str(value))
    monkeypatch.setenv("REFLEXR_CHECKPOINT_HISTORY", "14")
    settings = load_settings()
    client, async_client = Client(settings), AsyncClient(settings)
    stores = [(FleetApp(settings, {}).new_store(), True), (client.store, False), (async_client.store, False)]
    try:
        for store, strict in stores:
            o = store.options
            assert (o.run_retention_s, o.dead_retention_s, o.max_interruptions, o.checkpoint_history) == (
                11, 12, 13, 14,
            )  # fmt: skip
            assert store.codec is o.codec and o.codec.strict is strict
    finally:
        stores[0][0].close()
        client.close()
        asyncio.run(async_client.close())
