"""Whether the Redis under the store keeps what it is given: its eviction policy and persistence.

A Redis with ``maxmemory-policy allkeys-lru`` (or any policy but ``noeviction``) drops run keys
under memory pressure, and one with neither AOF nor RDB forgets every run when it restarts:
G1 holds only "as long as Redis keeps its data". Nothing else would say so, so the worker (at
start), ``health --redis`` and the API (``/readyz``, the console's overview) read the settings
with :func:`read_durability` and word the one warning with :func:`durability_warning`.
"""

from __future__ import annotations

from redis import exceptions as redis_errors

from reflexr_graph import errors
from reflexr_graph.model import Durability
from reflexr_graph.store.ops import Op, cmd
from reflexr_graph.store.records import text

SETTINGS = ("maxmemory-policy", "appendonly", "save")

UNCHECKED = (
    "could not check whether Redis may lose runs: it refuses CONFIG GET (as managed Redis does); "
    "make sure it runs with maxmemory-policy noeviction and persistence on (appendonly yes)"
)
"""Said once where CONFIG is refused: the check cannot be made, so the operator must."""


def read_durability() -> Op[Durability]:
    """One CONFIG GET of the three settings; unchecked where the server refuses CONFIG."""
    try:
        found = yield cmd("config_get", *SETTINGS)
    except errors.RedisMisconfigured as exc:
        if exc.kind != "no_permission":  # NOPERM: an ACL user without CONFIG
            raise
        return Durability(checked=False)
    except redis_errors.ResponseError as exc:
        if "unknown command" not in str(exc).lower():  # a managed Redis renames or drops CONFIG
            raise
        return Durability(checked=False)
    values = {text(key): text(value) for key, value in dict(found).items()}
    return Durability(
        checked=True,
        maxmemory_policy=values.get("maxmemory-policy"),
        appendonly=values.get("appendonly"),
        save=values.get("save"),
    )


def durability_note(found: Durability) -> str | None:
    """What to tell an operator once: :func:`durability_warning`, or that it could not be checked."""
    return durability_warning(found) or (None if found.checked else UNCHECKED)


def durability_warning(found: Durability) -> str | None:
    """The one line that says how this Redis may lose runs and what to set; None when it will not
    (or could not be checked: see :func:`durability_note`)."""
    if not found.checked:
        return None
    problems = []
    if found.maxmemory_policy is not None and found.maxmemory_policy != "noeviction":
        problems.append(
            f"maxmemory-policy is {found.maxmemory_policy}, so Redis evicts run keys when memory is "
            "short: set maxmemory-policy noeviction"
        )
    if found.appendonly == "no" and found.save == "":
        problems.append(
            'persistence is off (appendonly no, save ""), so a restart forgets every run: set appendonly yes'
        )
    if not problems:
        return None
    return (
        f"Redis may lose runs: {'; and '.join(problems)} (in redis.conf, or with CONFIG SET then "
        "CONFIG REWRITE)"
    )
