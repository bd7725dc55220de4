"""REFLEXR_BROKER_URL and redis+sentinel:// URLs: what the fleet's Celery config becomes for each broker."""

from __future__ import annotations

import ssl

import pytest

from reflexr_graph.config.broker import BrokerKind, kind_of
from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.settings import Settings, load_settings
from reflexr_graph.errors import SettingsError
from reflexr_graph.store import sentinel

AMQP = "amqp://user:s3cret@rabbit:5672/vh"
SENTINEL = "redis+sentinel://:pw@s1:26379,s2:26380/mymaster/2?sentinel_password=spw"


def test_broker_defaults_to_the_store_redis() -> None:
    s = Settings(redis_url="redis://store:6379/1")
    assert (s.broker, s.broker_is_store) == ("redis://store:6379/1", True)
    assert celery_config(s)["broker_url"] == "redis://store:6379/1"


def test_amqp_broker_gets_quorum_queues_confirms_and_no_redis_transport() -> None:
    """RabbitMQ: quorum queues for the default and every missing (graph) queue, per-consumer QoS,
    publisher confirms, the fleet's acks_late/prefetch 1; none of the Redis transport's options."""
    s = Settings(broker_url=AMQP)
    assert kind_of(s.broker) is BrokerKind.AMQP and not s.broker_is_store
    conf = celery_config(s)
    assert conf["broker_url"] == AMQP
    assert conf["task_default_queue_type"] == conf["task_create_missing_queue_type"] == "quorum"
    assert conf["worker_detect_quorum_queues"] is True
    assert conf["broker_transport_options"] == {"confirm_publish": True}
    assert "broker_transport" not in conf, "kombu picks py-amqp from the scheme"
    assert conf["task_acks_late"] and conf["worker_prefetch_multiplier"] == 1
    assert conf["broker_use_ssl"] is None
    tls = celery_config(Settings(broker_url="amqps://rabbit:5671//"))["broker_use_ssl"]
    assert tls == {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": "rabbit"}


def test_sentinel_url_is_parsed_and_given_to_kombu_in_its_own_spelling() -> None:
    address = sentinel.parse(SENTINEL)
    assert address.sentinels == (("s1", 26379), ("s2", 26380))
    assert (address.master, address.db, address.password, address.sentinel_password) == (
        "mymaster",
        2,
        "pw",
        "spw",
    )
    conf = celery_config(Settings(redis_url=SENTINEL))
    assert conf["broker_url"] == "sentinel://:pw@s1:26379;sentinel://:pw@s2:26380/2"
    assert conf["broker_transport"] == "reflexr_graph.fleet.transport:SentinelTransport"
    opts = conf["broker_transport_options"]
    assert opts["master_name"] == "mymaster" and opts["sentinel_kwargs"] == {"password": "spw"}
    assert opts["visibility_timeout"] == 3600, "the Redis transport's options apply on Sentinel too"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379", "primary's name"),
        ("redis+sentinel://:pw@/mymaster", "at least one sentinel"),
        ("redis+sentinel://s1:x/mymaster", "host:port"),
        ("redis+sentinel://s1:26379/mymaster/zero", "primary's name"),
        ("redis+sentinel://s1/mymaster?tls=1", "unknown"),
    ],
)
def test_bad_sentinel_urls_say_what_to_fix_without_the_password(
    url: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEXR_REDIS_URL", url)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert says in str(err.value) and "REFLEXR_REDIS_URL" in str(err.value)
    assert "pw" not in str(err.value)


def test_unknown_broker_scheme_is_refused_without_echoing_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFLEXR_BROKER_URL", "sqs://key:secret@x")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "REFLEXR_BROKER_URL" in str(err.value) and "amqp://" in str(err.value)
    assert "secret" not in str(err.value)


def test_broker_url_is_not_in_the_settings_repr() -> None:
    assert "s3cret" not in repr(Settings(broker_url=AMQP))
