"""Tests import the private redis-server launcher from here; it lives in the package for the demo too."""

from reflexr_graph.local_redis import NO_RETRY, RedisFactory, RedisServer, RedisServerError

__all__ = ["NO_RETRY", "RedisFactory", "RedisServer", "RedisServerError"]
