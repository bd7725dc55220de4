"""A key of the wrong type where a reader expects a run's: skipped with a warning, never a crash.

Run keys and the indexes named after user text cannot collide (store/keys.py: USER_TEXT), but a
store written before that layout, or by a foreign producer before its task ids were checked, may
still hold a key that parses as a run's and is a list or a sorted set. The readers that walk the
keyspace (the payload sweep, ``rekey``) and the migration meet such keys; each calls
:func:`wrong_type` to tell that case from any other Redis error.
"""

from __future__ import annotations

import logging

import redis

log = logging.getLogger(__name__)


def wrong_type(exc: redis.ResponseError, key: str, reader: str) -> bool:
    """True (and a warning logged) when ``exc`` is Redis's WRONGTYPE for ``key``: the caller skips
    the key and carries on; False for any other error, which the caller raises."""
    if not str(exc).startswith("WRONGTYPE"):
        return False
    log.warning(
        "%s: key %r is not of the type a run's key of that name has (a key written before the "
        "current layout, or by a foreign producer); skipped, the %s carries on with the next key",
        reader,
        key[:200],
        reader,
    )
    return True
