"""The repository's worker app, for the demo, the benchmarks and the tests: ``celery -A workers worker``
run from the repository root (``workers`` is not part of the installed package).

It is the app users run, ``reflexr_graph.worker`` (``celery -A reflexr_graph.worker worker``): the
graphs named in ``REFLEXR_GRAPHS``, and only those. The examples in ``workers/examples`` load when
named there too (``workers.examples.triage:triage``), so a production worker never publishes them and
they never take a name from a user's graph. The app is built when first asked for (``workers.app``, as
``celery -A workers`` asks), not when this package is imported: importing ``workers.examples`` from
``REFLEXR_GRAPHS`` while ``reflexr_graph.worker`` builds the app must not build a second one.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("app", "celery"):
        from reflexr_graph import worker

        return getattr(worker, name)
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
