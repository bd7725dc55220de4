"""Tests import the private redis-server launcher from here; it lives in the package for the demo too."""

import redis

from reflexr_graph.local_redis import NO_RETRY, RedisFactory, RedisServer, RedisServerError

__all__ = [
    "FILL_PREFIX",
    "NO_RETRY",
    "RedisFactory",
    "RedisServer",
    "RedisServerError",
    "fill_past_maxmemory",
    "free_the_fill",
]

FILL_PREFIX = "fill:"


def fill_past_maxmemory(r: redis.Redis, over: int = 1 << 20) -> None:
    """Hold Redis at its maxmemory: keys ``fill:*`` until it uses ``over`` bytes more than that.

    Written with the limit lifted for a moment, so the fill ends over it, not a write's size under
    it (a write refused at the limit leaves memory just below, where the next small one lands).
    Delete the ``fill:*`` keys to free the memory again.
    """
    limit = int(r.config_get("maxmemory")["maxmemory"])
    assert limit > 0, "the server has no maxmemory to fill to"
    r.config_set("maxmemory", 0)
    try:
        n = 0
        while int(r.info("memory")["used_memory"]) < limit + over:
            with r.pipeline(transaction=False) as pipe:
                for _ in range(16):
                    pipe.set(f"{FILL_PREFIX}{n}", b"x" * 65536)
                    n += 1
                pipe.execute()
    finally:
        r.config_set("maxmemory", limit)


def free_the_fill(r: redis.Redis) -> None:
    """Delete what :func:`fill_past_maxmemory` wrote."""
    found = list(r.scan_iter(match=f"{FILL_PREFIX}*", count=1000))
    for at in range(0, len(found), 500):
        r.delete(*found[at : at + 500])
