"""The whole fleet over TLS with AUTH: the Celery broker, the store and the client, on one rediss:// URL."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet
from tests.redis_server import RedisFactory
from tests.tls import tls_redis


@pytest.mark.slow
def test_a_run_succeeds_over_tls_with_a_password(
    private_redis: RedisFactory, tmp_path: Path, client_for: Callable[[Fleet], Client]
) -> None:
    """Security: REFLEXR_REDIS_URL=rediss://:PASSWORD@... carries the broker, the store and the
    client over TLS (the server's certificate checked against the CA in the URL) with AUTH."""
    server, tls_port, cert = tls_redis(private_redis, tmp_path, "s3cret")
    url = f"rediss://:s3cret@127.0.0.1:{tls_port}/0?ssl_cert_reqs=required&ssl_ca_certs={cert}"
    fleet = Fleet(url, tmp_path, queue=f"tls-{uuid.uuid4().hex[:8]}")
    try:
        fleet.start()
        client = client_for(fleet)
        run_id = client.enqueue("steps", {"value": 5})
        info = client.wait(run_id, timeout=60)
        assert info.status is Status.SUCCEEDED, info
        assert info.output == {"value": 5, "steps": ["s1", "s2", "s3"], "attempt": 1}
    finally:
        fleet.close()
    plain = redis.Redis(port=server.port, password="s3cret")
    assert plain.exists(keys.run(run_id)) == 1, "the run was recorded in that Redis"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=server.port).ping()
