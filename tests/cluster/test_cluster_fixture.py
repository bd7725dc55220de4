"""The test cluster itself: three primaries that serve every slot."""

from __future__ import annotations

import redis

from tests.redis_cluster import RedisCluster


def test_the_session_cluster_serves_every_slot_from_three_primaries(
    redis_cluster: RedisCluster, cluster_client: redis.RedisCluster
) -> None:
    assert len(redis_cluster.primary_nodes()) == 3
    cluster_client.set("a", "1")
    cluster_client.set("b", "2")  # another slot, likely another primary
    assert cluster_client.mget_nonatomic(["a", "b"]) == [b"1", b"2"]
