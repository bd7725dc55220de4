"""The oldest Redis the store runs on, and the check of the server's version against it.

Every script declares its flags on a ``#!lua`` first line (store/scripts.py), which Redis reads
since 7.0: that is what makes a script all or nothing over maxmemory. An older server cannot run
the scripts at all, so a worker stops at start and ``health --redis`` fails, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reflexr_graph import errors
from reflexr_graph.store.ops import Op, cmd

MIN_VERSION = (7, 0)
"""Script flags (the ``#!lua`` line of every script) came in Redis 7.0."""
MIN_TEXT = ".".join(map(str, MIN_VERSION))


def _parse(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _versions(info: Mapping[str, Any]) -> list[str]:
    """Each server's ``redis_version``: one, or a cluster's answer per node."""
    if "redis_version" in info:
        return [str(info["redis_version"])]
    return [str(node["redis_version"]) for node in info.values() if isinstance(node, Mapping)]


def check() -> Op[str]:
    """The server's version (a cluster's oldest node's), once known new enough; RedisMisconfigured
    (kind ``version``) naming the version found and the minimum when it is older."""
    info: Mapping[str, Any] = yield cmd("info", "server")
    found = min(_versions(info), key=_parse, default="unknown")
    if _parse(found)[:2] < MIN_VERSION:
        raise errors.RedisMisconfigured(
            f"Redis {found} is older than {MIN_TEXT}, the oldest that runs reflexr's scripts (their flags "
            f"keep each all or nothing when Redis is full); upgrade Redis to {MIN_TEXT} or later",
            kind="version",
        )
    return found
