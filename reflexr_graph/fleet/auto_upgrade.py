"""Auto-upgrades: a run of a version whose graph says ``on_new_version="auto_upgrade"`` moves by
itself to the newest served version once no live worker has served its own for
``REFLEXR_VERSION_GRACE_S``.

The workers of a version publish its behaviour with it (model.py ``VersionEntry``), so the
choice of the code a run started on governs it. A worker of the newest served version moves the
runs at its beat, through the very path of ``upgrade --resume-compatible --include-running``
(store/upgrades.py ``upgrade``), judged by its own GraphAction as ``check-checkpoints`` judges
(core/compat.py): held, queued, retrying and waiting runs (those waiting for a signal or an
approval too, which then run on the new version once answered) move at once, a running one once
its attempt ends. A run the new graph cannot read stays held and says why (``waiting_for`` and an
``upgrade_held`` event), unless its graph says ``on_incompatible="restart"``: then it starts over.

Cost: an idle worker reads its graphs' published versions once an :data:`ENTRIES_EVERY_S` (one
HGETALL each; a version published later is newer than its own, whose runs it never moves). Only a
graph with an older auto-upgrading version costs more: who serves its versions is read once a
:data:`SWEEP_EVERY_S`, at every beat while a dark version waits out its grace, and whenever a run
is held for another version of its graph (which the beat's read of the held versions shows).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from reflexr_graph import clock, errors
from reflexr_graph.core.action import GraphAction
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.model import UpgradePlan, VersionEntry
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.upgrades import AUTO, upgrade

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 60.0
"""How often a worker looks for older versions of its graphs that lost their last live worker."""
ENTRIES_EVERY_S = 600.0
"""How often it reads its graphs' published versions again (a version's behaviour may change when
it is deployed again; a run held for a version it does not know makes it read them at once)."""


@dataclass
class Watch:
    """What this process saw of the dark versions of its graphs (graph, version)."""

    dark_since: dict[tuple[str, str], float] = field(default_factory=dict)
    """Store-clock seconds when this process first saw the version served by no live worker."""
    swept: set[tuple[str, str]] = field(default_factory=set)
    """Versions whose live runs were all moved (or marked); later, only their held runs are."""
    entries: dict[str, tuple[float, list[VersionEntry]]] = field(default_factory=dict)
    """Each graph's published versions as last read, with when to read them again (monotonic)."""
    next_sweep: float = 0.0
    pending: bool = False
    """A dark version is within its grace: look again at the next beat, not the next sweep."""


WATCH = Watch()


def auto_upgrade(app: FleetApp, store: RedisStore, held: dict[tuple[str, str], int]) -> int:
    """Move the runs of the dark auto-upgrading versions of this worker's graphs, when this worker
    serves the newest version; ``held`` is the (graph, version) pairs with held runs and their
    generation, as the beat read them (store ``held_versions``). Returns how many runs moved."""
    now = time.monotonic()
    sweep = now >= WATCH.next_sweep or WATCH.pending
    if sweep:
        WATCH.next_sweep, WATCH.pending = now + SWEEP_EVERY_S, False
    moved = 0
    for graph, action in sorted(app.reflexr_registry.items()):
        others = {v: n for (g, v), n in held.items() if g == graph and v != action.version}
        if sweep or others:
            moved += _graph(app, store, action, others)
    return moved


def _older_auto(store: RedisStore, action: GraphAction, held: dict[str, int]) -> list[VersionEntry]:
    """The other published versions of the graph whose runs auto-upgrade."""
    now = time.monotonic()
    cached = WATCH.entries.get(action.name)
    if cached is None or cached[0] <= now or not set(held) <= {e.version for e in cached[1]}:
        cached = WATCH.entries[action.name] = (now + ENTRIES_EVERY_S, store.published_versions(action.name))
    return [e for e in cached[1] if e.on_new_version == "auto_upgrade" and e.version != action.version]


def _graph(app: FleetApp, store: RedisStore, action: GraphAction, held: dict[str, int]) -> int:
    auto = _older_auto(store, action, held)
    if not auto:
        return 0
    live = store.live_versions(action.name)
    if next((v for v, workers in live.items() if workers), None) != action.version:
        return 0  # only a worker of the newest served version judges and moves runs
    grace_s = app.reflexr_settings.version_grace_s
    moved = 0
    for entry in auto:
        key = (action.name, entry.version)
        if live.get(entry.version):
            WATCH.dark_since.pop(key, None)
            WATCH.swept.discard(key)
            continue
        dark_s = clock.now() - WATCH.dark_since.setdefault(key, clock.now())
        if dark_s < grace_s:
            WATCH.pending = True
        elif key not in WATCH.swept or entry.version in held:
            plan = _move(store, action, entry, sweep=key not in WATCH.swept)
            WATCH.swept.add(key)
            moved += len(plan.run_ids) if plan else 0
            if plan is not None and not plan.kept and entry.version in held:
                # None held any more (unless held since): the beats stop looking at this version.
                store.unhold_version(action.name, entry.version, held[entry.version])
    return moved


def _move(store: RedisStore, action: GraphAction, entry: VersionEntry, *, sweep: bool) -> UpgradePlan | None:
    try:
        plan = store.do(
            upgrade(
                action.name, entry.version, code=action, include_running=sweep,
                hold_incompatible=entry.on_incompatible == "hold", by=AUTO,
            )
        )  # fmt: skip
    except errors.OperationRefused as exc:
        log.info("no auto-upgrade of graph %r from version %s now (%s); looking again later",
                 action.name, entry.version, exc)  # fmt: skip
        return None
    _say(plan)
    return plan


def _say(plan: UpgradePlan) -> None:
    if plan.run_ids or plan.running:
        log.info(
            "auto-upgrade of graph %r: no live worker serves version %s; %d run(s) moved to version %s "
            "(%d resume from their checkpoint, %d start over), %d move once their attempt ends",
            plan.graph, plan.from_version, len(plan.run_ids), plan.to_version,
            len(plan.resumed), len(plan.restarted), len(plan.running),
        )  # fmt: skip
    for kept in plan.kept:
        if not kept.newly:
            continue
        log.warning(
            "run %s stays held for version %s of graph %r: %s (on_incompatible='hold'); move it with "
            "`reflexr-graph upgrade`, or start a worker of its version",
            kept.run_id, plan.from_version, plan.graph, kept.reason,
        )  # fmt: skip
