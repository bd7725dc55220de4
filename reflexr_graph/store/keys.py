"""Every Redis key name reflexr-graph uses is built here, and nowhere else.

Per-run keys share the hash tag ``{run_id}`` (``rg:{<run_id>}:run`` ...), so in a Redis
Cluster one run's keys would sit in one slot. The global indexes (``rg:all``, the status
sets, ``rg:dead``, ``rg:leases``, ``rg:due``, ``rg:idem:*``, the worker registry) have fixed
names without that
tag, and the Lua scripts change a run and its indexes in one atomic step. Those scripts
therefore require a single Redis primary (use Sentinel for high availability), not Cluster.

The scripts receive their keys in one fixed order, :func:`script_keys`; the Lua prelude
(``lua/_lib.lua``) reads them by the same positions, so the two must change together.
"""

from __future__ import annotations

from collections.abc import Sequence

from reflexr_graph.model import Status

PREFIX = "rg"

ALL = f"{PREFIX}:all"
"""Every run, score = created ms."""
DEAD = f"{PREFIX}:dead"
"""Dead-letter index, score = dead-lettered ms."""
LEASES = f"{PREFIX}:leases"
"""Running runs, score = lease expiry ms; the reaper scans it for lapsed leases."""
DUE = f"{PREFIX}:due"
"""Runs that need a Celery message sent, score = due ms."""
REAPER_LOCK = f"{PREFIX}:reaper:lock"
"""Held by the one reaper that may act at a time."""
REAPER_NUDGE = f"{PREFIX}:reaper:nudge"
"""A pub/sub channel, not a key: a write that makes a run due soon (a retry, a timer, a release)
publishes on it, so a reaper sleeping until its next known due time wakes now."""
REAPER_PASS = f"{PREFIX}:reaper:pass"
"""The last pass of the reaper holding the lock: "<epoch ms> <run_id of the Redis server>". A server
has a new run_id each time it starts (a promoted replica has its own), so the next pass can tell
that Redis restarted or failed over since then (store/recovery.py: mark_pass)."""
GRAPHS = f"{PREFIX}:graphs"
"""Published graphs: name -> JSON entry (fingerprint, JSON Schemas, Mermaid), written by workers."""
WORKERS = f"{PREFIX}:workers"
"""Live workers, score = expiry ms of their last heartbeat; member = the worker's node name."""
QUARANTINE = f"{PREFIX}:quarantine"
"""Queue items no worker could run, moved aside: a list of JSON entries, newest first, capped
(store/quarantine.py)."""
QUARANTINE_COUNTS = f"{PREFIX}:quarantine:counts"
"""How many items were moved aside, by reason (hash reason -> count); it keeps counting when old
entries fall off the capped list."""

EVENTS_TEMPLATE = f"{PREFIX}:events:template"
"""A stream holding one marker entry (id 0-1): each new run's event stream starts as a COPY of it,
which is sized to what it holds, where a new stream's first node takes 4 KB (``lua/_lib.lua``)."""
EVENTS_MARKER = "0-1"
"""The id of that marker entry in every run's stream; readers skip it."""

SCHEDULES = f"{PREFIX}:schedules"
"""Every schedule: name -> its definition as JSON (core/schedules.py: Schedule)."""
SCHEDULE_NEXT = f"{PREFIX}:schedule:next"
"""The next fire time of every schedule not paused, score = epoch ms; the scheduler reads its low end."""
SCHEDULE_LAST = f"{PREFIX}:schedule:last"
"""Each schedule's last fire: name -> ``<fire ms>|<run id>`` (for ``--overlap skip`` and listings)."""
RETRIES = f"{PREFIX}:retries"
"""The retries of the last hour, a rollup for the console's overview: member ``<run_id>|<attempt>``,
score = ms the run went retrying. ``lua/_lib.lua`` (to_retrying) adds one and drops those older
than an hour in the same script, so a run that never retries costs nothing. It takes the place
of the retrying status set in :func:`script_keys`, which no script writes (:func:`status_set`)."""

LIMITS = f"{PREFIX}:limits"
"""Every limit key a step has used: key -> its configuration as JSON (store/limits.py)."""

STATUS_ORDER: tuple[Status, ...] = (
    Status.QUEUED,
    Status.RUNNING,
    Status.RETRYING,
    Status.SUCCEEDED,
    Status.DEAD,
    Status.CANCELLED,
    Status.WAITING,
)
"""Order of the status sets in :func:`script_keys`; ``_lib.lua`` mirrors it."""


def _tagged(run_id: str, suffix: str) -> str:
    return f"{PREFIX}:{{{run_id}}}:{suffix}"


def run(run_id: str) -> str:
    """The run record hash."""
    return _tagged(run_id, "run")


def ckpt(run_id: str) -> str:
    """Every checkpoint the run keeps, the latest and its history: a hash, seq -> checkpoint JSON.

    Each is written once, by the save that makes it the latest. The run hash holds each one's
    entry (``c:<seq>`` = ``saved_at ms|size|attempt|next_node``) and the range kept (``ck_first``,
    ``ck_last``: at most ``REFLEXR_CHECKPOINT_HISTORY`` + 1), so the latest is a pointer, not a copy.
    """
    return _tagged(run_id, "ckpt")


def events(run_id: str) -> str:
    """The run's event stream."""
    return _tagged(run_id, "events")


def tb(run_id: str) -> str:
    """The last failed attempt's traceback (kept out of the run hash, it can be large)."""
    return _tagged(run_id, "tb")


def memo(run_id: str) -> str:
    """Work finished since the latest checkpoint: branch results and durable calls (field -> JSON).

    Emptied by the script that saves the next checkpoint: that checkpoint holds it all.
    """
    return _tagged(run_id, "memo")


def mailbox(run_id: str) -> str:
    """Signals sent to the run that no wait has taken yet (signal name -> value JSON)."""
    return _tagged(run_id, "mailbox")


def stream(run_id: str) -> str:
    """What the run's steps emitted (``reflexr_graph.emit``): a Redis stream whose entry ids are
    ``0-<offset>``, offsets 1, 2, 3 ... in the order written, so a reader resumes after an offset.

    Written by ``lua/emit.lua`` only; ``stream`` = ``1`` in the run hash says it exists, so a run's
    end expires it, a replay persists it and a purge deletes it only then.
    """
    return _tagged(run_id, "stream")


def run_of(key: object) -> str:
    """The run a per-run key belongs to (its hash tag), '' for any other key."""
    name = key.decode() if isinstance(key, bytes) else str(key)
    start = name.find("{")
    end = name.find("}", start + 1)
    return name[start + 1 : end] if name.startswith(f"{PREFIX}:{{") and end > start else ""


RUN_HASHES = ("run", "ckpt", "memo", "mailbox")
"""The per-run hashes that may hold payloads (a payload store sweep reads them for references)."""


def every_run_key() -> str:
    """A SCAN pattern that matches every per-run key of every run."""
    return f"{PREFIX}:{{*}}:*"


def run_keys(run_id: str) -> tuple[str, ...]:
    """Every per-run key; retention expires and purge deletes those of them that exist."""
    return (
        run(run_id),
        ckpt(run_id),
        events(run_id),
        tb(run_id),
        memo(run_id),
        mailbox(run_id),
        stream(run_id),
    )


def tag_index(key: str, value: str) -> str:
    """Runs carrying tag ``key=value``, score = created ms: a listing by tag reads only these.
    Written by ``create_run.lua``; an entry whose run expired is dropped by the listing that meets
    it (core/tags.py keeps ``=`` out of keys and values, so the name is unambiguous)."""
    return f"{PREFIX}:tag:{key}={value}"


def is_tag_index(name: str) -> bool:
    """True for a key :func:`tag_index` built."""
    return name.startswith(f"{PREFIX}:tag:")


def status_set(status: Status | str) -> str:
    """Runs in one status, score = updated ms; not written for queued, retrying and running runs
    (see :func:`status_index`), whose positions in :func:`script_keys` stay so the others hold theirs."""
    return f"{PREFIX}:status:{Status(status).value}"


def status_index(status: Status | str) -> str:
    """Where the runs of one status are listed: queued and retrying runs from :data:`DUE` (every
    such run is due: its retry, or the safety net of its message), running runs from
    :data:`LEASES`, the others from their status set. The due set and the leases hold other
    statuses too, so a listing checks each."""
    found = Status(status)
    if found in (Status.QUEUED, Status.RETRYING):
        return DUE
    if found is Status.RUNNING:
        return LEASES
    return status_set(found)


def idem_scope(graph: str, idempotency_key: str) -> str:
    """An idempotency key as the store scopes it: per graph, so two graphs never share one."""
    return f"{graph}:{idempotency_key}"


def idem(scope: str) -> str:
    """Maps a scoped idempotency key (:func:`idem_scope`) to the run it created."""
    return f"{PREFIX}:idem:{scope}"


def worker(name: str) -> str:
    """One live worker's description (JSON), expiring with its heartbeat."""
    return f"{PREFIX}:worker:{name}"


def served(graph: str) -> str:
    """The live workers that run ``graph``, score = expiry ms of their last heartbeat."""
    return f"{PREFIX}:served:{graph}"


def served_version(graph: str, version: str) -> str:
    """The live workers that run ``version`` of ``graph``, score = expiry ms of their last heartbeat
    (a graph name holds no '@')."""
    return f"{PREFIX}:served:{graph}@{version}"


def versions(graph: str) -> str:
    """Every version of ``graph`` a worker published: hash version -> JSON (first published, nodes)."""
    return f"{PREFIX}:versions:{graph}"


def version_held(graph: str, version: str) -> str:
    """Runs of ``graph`` held waiting for a worker of ``version`` (a set of run ids)."""
    return f"{PREFIX}:versions:{graph}:held:{version}"


def _limit(key: str, suffix: str) -> str:
    # A limit's keys share the hash tag {<key>}, as a run's share {<run_id>}.
    return f"{PREFIX}:limit:{{{key}}}:{suffix}"


def limit_tat(key: str) -> str:
    """The limit's rate state: its GCRA theoretical arrival time, epoch ms (expires when idle)."""
    return _limit(key, "tat")


def limit_slots(key: str) -> str:
    """The limit's concurrency slots held now, score = lease expiry ms; member = ``run|attempt|id``."""
    return _limit(key, "slots")


def limit_stats(key: str) -> str:
    """The limit's counters: granted, denied, waited_ms (hash)."""
    return _limit(key, "stats")


def limit_keys(run_id: str, key: str) -> list[str]:
    """KEYS of ``lua/limit_acquire.lua``: 1 run, 2 events, 3 the limits index, 4 tat, 5 slots, 6 stats."""
    return [run(run_id), events(run_id), LIMITS, limit_tat(key), limit_slots(key), limit_stats(key)]


def script_keys(run_id: str, idem_guess: str, extra: Sequence[str] = ()) -> list[str]:
    """KEYS for the per-run scripts, in the positions ``lua/_lib.lua`` expects.

    1 run, 2 ckpt, 3 events, 4 tb, 5 idem (built from ``idem_guess``, a scoped key or the
    run id), 6 all, 7 dead, 8 leases, 9 due, 10..16 the status sets in :data:`STATUS_ORDER`
    (12, retrying's, is :data:`RETRIES`), 17 memo, 18 mailbox, then the script's own ``extra``
    keys (19 on), and last the run's stream: the prelude reads it as ``KEYS[#KEYS]``, so no
    script's own positions move.
    """
    return [
        run(run_id),
        ckpt(run_id),
        events(run_id),
        tb(run_id),
        idem(idem_guess),
        ALL,
        DEAD,
        LEASES,
        DUE,
        *(RETRIES if s is Status.RETRYING else status_set(s) for s in STATUS_ORDER),
        memo(run_id),
        mailbox(run_id),
        *extra,
        stream(run_id),
    ]


BROKER_PRIORITY_SEP = "\x06\x16"
"""kombu's Redis transport's separator between a queue's name and a priority (``Channel.sep``);
tests/surfaces/test_step_control_surfaces.py checks it against kombu's."""


def broker_queue(queue: str, priority: int = 0) -> str:
    """The list kombu's Redis transport keeps a Celery queue's messages of ``priority`` in: the
    queue's own name for priority 0, ``<queue>\x06\x16<priority>`` for the others.

    Only a client writes it directly (``client/publish.py``: a new run's message, which
    ``create_run.lua`` pushes, a woken run's, which ``signal.lua`` pushes, and the async client's
    later ones); everything else goes through kombu.
    """
    return f"{queue}{BROKER_PRIORITY_SEP}{priority}" if priority else queue
