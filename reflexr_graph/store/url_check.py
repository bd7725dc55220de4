"""A Redis or broker URL checked before anything parses it, so a malformed one is told by what is
wrong and the setting's name, never by its text (which holds the password).

urllib, and so redis-py and kombu, end a URL's authority at the first ``/``, ``?`` or ``#``: a
password holding one leaves the rest of the password where the host or port is read, and
urllib's own error quotes it (``Port could not be cast to integer value as 's3cr3tPW'``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from reflexr_graph.errors import SettingsError

_ENCODE = "percent-encode a '/', '?', '#' or '@' in the password (%2F, %3F, %23, %40)"
_MANY_HOSTS = ("redis+sentinel", "redis+cluster", "rediss+cluster")
"""Schemes whose authority lists several hosts; their own parsers (sentinel.py, cluster.py) check it."""


def problem(url: str) -> str | None:
    """What makes ``url`` unusable, in words that never quote it; None when it parses."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"does not parse as a URL (a bracketed IPv6 host?); {_ENCODE}"
    if "@" in parts.path + parts.query + parts.fragment:
        return f"does not parse: an '@' follows the host (a '/', '?' or '#' in the password); {_ENCODE}"
    if not parts.scheme or parts.scheme in _MANY_HOSTS:
        return None
    try:
        port, host = parts.port, parts.hostname
    except ValueError:
        return f"does not parse: its port is not a number from 0 to 65535; {_ENCODE}"
    if not host:
        return f"names no host, e.g. redis://:password@host:6379/0; {_ENCODE}"
    del port
    db = parts.path.strip("/")
    if parts.scheme in ("redis", "rediss") and db and not db.isdigit():
        return f"does not parse: its database (the path) is not a number, e.g. redis://host:6379/0; {_ENCODE}"
    return None


def check(url: str, setting: str) -> None:
    """SettingsError naming ``setting`` (e.g. ``REFLEXR_REDIS_URL``) when ``url`` is unusable."""
    found = problem(url)
    if found is not None:
        raise SettingsError(f"{setting} {found}")
