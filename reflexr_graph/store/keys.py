"""Every Redis key name reflexr-graph uses is built here, and nowhere else.

The store is split into :data:`SHARDS` shards, so that a Redis Cluster can spread it over its
primaries while every script still touches the keys of one slot (docs/design.md#the-store-on-a-redis-cluster).
A run belongs to the shard :func:`shard_of` its id; its keys and its shard's indexes (every run,
the status sets, the dead letters, the leases, the due set, the reaper's lock and pass mark)
share the hash tag ``{s<n>}``: ``rg:{s7}:<run_id>:run``, ``rg:{s7}:due``. An idempotency key
sits in the shard of its scope, and the clients give a keyed run an id in that shard
(:func:`run_id_in`), so the key's lookup and the run's creation are one script. Graphs, schemas,
worker presence, versions, schedules and the quarantine are low-rate and sit in one control slot, ``{c}``.

On a standalone Redis a run's keys have the same names (a hash tag is then only part of a name),
but its indexes are one shard's, shard 0 (:class:`Shards`): a listing or a reaper pass reads one
index, as it would unsharded.

No user text can forge a key: a run id matches :data:`RUN_ID_PATTERN` (no ``:``), and the
indexes named after user text (tags, idempotency keys) start their segment with
:data:`USER_TEXT` and hold the text as its SHA-1 only: ``rg:{s7}:#tag:<sha1>``,
``rg:{s7}:#idem:<sha1>`` (docs/design.md, "User text never forges a key").

The scripts receive their keys in one fixed order, :func:`script_keys`; the Lua prelude
(``lua/_lib.lua``) reads them by the same positions, so the two must change together.
"""

from __future__ import annotations

import hashlib
import re
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from reflexr_graph.model import Status

PREFIX = "rg"

SHARDS = 64
"""How many shards a store on a Redis Cluster has; fixed, since a run's shard is part of its
keys' names. Each listing and each reaper pass reads every shard once, so this is their cost
there; 64 spreads a store evenly over up to some 20 primaries (a primary serves whole shards).
A standalone store keeps its indexes in one shard (:class:`Shards`)."""


@dataclass(frozen=True)
class Shards:
    """How a store's indexes are sharded: :data:`STANDALONE` (one shard, 0) on a standalone or a
    Sentinel-managed Redis, :data:`CLUSTER` (:data:`SHARDS`) on a Redis Cluster. A run's own keys
    are named the same either way (tag ``{s<shard_of(run id)>}``); only which shard's indexes
    list it differs, and a standalone Redis lets one script touch keys of any tag. The store's
    kind decides it (``store/cluster.py: shards``), so every process on one store agrees."""

    count: int

    def of(self, run_id: str) -> int:
        """The shard whose indexes list ``run_id``: its tag's on a cluster, 0 on a standalone store."""
        return shard_of(run_id) if self.count > 1 else 0

    @property
    def all(self) -> range:
        """Every shard of the store."""
        return range(self.count)


STANDALONE = Shards(1)
CLUSTER = Shards(SHARDS)

CONTROL = f"{PREFIX}:{{c}}"
"""The control slot's prefix: graphs, schemas, worker presence, the quarantine, schedules, limits."""

REAPER_NUDGE = f"{PREFIX}:reaper:nudge"
"""A pub/sub channel, not a key: a write that makes a run due soon (a retry, a timer, a release)
publishes on it, so a reaper sleeping until its next known due time wakes now (on a cluster, a
PUBLISH reaches every node's subscribers)."""
GRAPHS = f"{CONTROL}:graphs"
"""Published graphs: name -> JSON entry (fingerprint, JSON Schemas, Mermaid), written by workers."""
WORKERS = f"{CONTROL}:workers"
"""Live workers, score = expiry ms of their last heartbeat; member = the worker's node name."""
QUARANTINE = f"{CONTROL}:quarantine"
"""Queue items no worker could run, moved aside: a list of JSON entries, newest first, capped
(store/quarantine.py)."""
QUARANTINE_COUNTS = f"{CONTROL}:quarantine:counts"
"""How many items were moved aside, by reason (hash reason -> count); it keeps counting when old
entries fall off the capped list."""
AUDIT = f"{CONTROL}:audit"
"""Destructive operator actions (purge, a cancel, a quarantine purge): a capped stream of
action, run, by and time, that outlives the runs it names (store/audit.py)."""

MAX_RUN_ID_LENGTH = 200
RUN_ID_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_RUN_ID_LENGTH - 1}}}")
"""What a run id may be: ours are uuids, a foreign producer's task ids are checked against it
where its message enters (fleet/guard.py). It holds no ``:``, so a run's key
``rg:{s<n>}:<run_id>:<suffix>`` has one segment between its tag and its suffix, and it starts
with a letter or digit, so no run key can start as an index of user text does (:data:`USER_TEXT`)."""

USER_TEXT = "#"
"""How the segment of a shard's index named after user text starts (``#tag:``, ``#idem:``): a
character no run id starts with, so no run key, tag, idempotency key or schedule name can forge
such an index, nor such an index a run key. The text itself enters the name only as its SHA-1
(:func:`_digest`): bounded, and of one charset, whatever the user wrote."""

MIGRATED = f"{CONTROL}:migrated:keyspace-2"
"""Set once the keys written before :data:`USER_TEXT` (``rg:{s<n>}:tag:<k>=<v>``,
``rg:{s<n>}:idem:<graph>:<key>``) have been moved (store/keyspace_migration.py)."""

EVENTS_MARKER = "0-1"
"""The id of that marker entry in every run's stream; readers skip it."""

SCHEDULES = f"{CONTROL}:schedules"
"""Every schedule: name -> its definition as JSON (core/schedules.py: Schedule)."""
SCHEDULE_NEXT = f"{CONTROL}:schedule:next"
"""The next fire time of every schedule not paused, score = epoch ms; the scheduler reads its low end.
A write that may make a fire sooner (schedule_put.lua) also publishes on a channel of this name, so a
scheduler sleeping until the fire it read wakes now (store/recovery.py: schedule_nudges)."""
SCHEDULE_LAST = f"{CONTROL}:schedule:last"
"""Each schedule's last fire: name -> ``<fire ms>|<run id>`` (for ``--overlap skip`` and listings)."""
LIMITS = f"{CONTROL}:limits"
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


def shard_of(name: str) -> int:
    """The shard of a run id, or of an idempotency key's scope (:func:`idem_scope`)."""
    return zlib.crc32(name.encode()) % SHARDS


def same_shard(run_id: str, scope: str) -> bool:
    """Whether a run and an idempotency key's scope are in one shard (and so one cluster slot)."""
    return shard_of(run_id) == shard_of(scope)


def _shard(shard: int) -> str:
    return f"{PREFIX}:{{s{shard}}}"


def valid_run_id(run_id: object) -> bool:
    """Whether ``run_id`` is one a run may have (:data:`RUN_ID_PATTERN`)."""
    return isinstance(run_id, str) and RUN_ID_PATTERN.fullmatch(run_id) is not None


def _digest(text: str) -> str:
    """User text as it enters a key name: the hex SHA-1 of its UTF-8 bytes (not a secret, a name)."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def run_id_in(shard: int) -> str:
    """A new random run id (a uuid4) whose shard is ``shard``: a keyed run's id, in its key's shard.

    The last three hex digits, random in a uuid4 anyway, are chosen among the 4,096 values; a uuid
    for which none of them lands in the shard is drawn again (with 64 shards, about never).
    """
    while True:
        head = str(uuid.uuid4())[:-3]
        seed = zlib.crc32(head.encode())
        for tail in range(4096):
            digits = f"{tail:03x}"
            if zlib.crc32(digits.encode(), seed) % SHARDS == shard:
                return head + digits


def new_run_id(graph: str, idempotency_key: str | None) -> str:
    """The id a producer gives a new run: in the shard of its idempotency key's scope when it has
    one (so the key and the run are in one slot), else any uuid4."""
    if idempotency_key:
        return run_id_in(shard_of(idem_scope(graph, idempotency_key)))
    return str(uuid.uuid4())


def _run_tag(run_id: str) -> str:
    """``rg:{s<n>}:<run_id>:``, how each of the run's own keys starts."""
    return f"{_shard(shard_of(run_id))}:{run_id}:"


def _tagged(run_id: str, suffix: str) -> str:
    return _run_tag(run_id) + suffix


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


def inputs(run_id: str) -> str:
    """The run's inputs JSON when it is longer than a listpack value (64 bytes): a string of its own.

    A hash with one value over 64 bytes is a hash table in Redis, where each field costs some 60
    bytes more, so long inputs are kept out of the run hash (``in`` = ``1`` there says they are
    here); short ones stay in its ``inputs`` field, at no command more (``lua/_lib.lua``).
    """
    return _tagged(run_id, "in")


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


def asks(run_id: str) -> str:
    """The run's external event waits (pydantic-ai's ``wait_for_external_event``, store/asks.py): a
    hash of ``<token digest>`` -> the wait (JSON), ``<token digest>|answer`` -> its answer (JSON),
    and ``open|<name digest>`` -> the digest of the latest wait of that name. The token itself is
    never kept nor part of a key: only its SHA-256, as a field."""
    return _tagged(run_id, "asks")


def stream(run_id: str) -> str:
    """What the run's steps emitted (``reflexr_graph.emit``): a Redis stream whose entry ids are
    ``0-<offset>``, offsets 1, 2, 3 ... in the order written, so a reader resumes after an offset.

    Written by ``lua/emit.lua`` only; ``stream`` = ``1`` in the run hash says it exists, so a run's
    end expires it, a replay persists it and a purge deletes it only then.
    """
    return _tagged(run_id, "stream")


def lanes(run_id: str) -> str:
    """When each branch step of the run's maps ran, for its timeline: a hash, field
    ``<claim>|<attempt>|<node>|<branch>`` -> ``<started ms>|<ended ms>``.

    Written by ``lua/record.lua`` with the branch's result, in the same round trip (no event per
    branch: the event stream is capped); ``lanes`` = ``1`` in the run hash says it exists, so a
    run's end expires it and a purge deletes it only then. Kept across checkpoints and replays,
    as the events are.
    """
    return _tagged(run_id, "lanes")


_RUN_SUFFIXES = ("run", "ckpt", "events", "tb", "memo", "mailbox", "in", "stream", "lanes", "asks")


def run_of(key: object) -> str:
    """The run a per-run key (``rg:{s<n>}:<run_id>:<suffix>``) belongs to, '' for any other key."""
    name = key.decode() if isinstance(key, bytes) else str(key)
    end = name.find("}:")
    if not name.startswith(f"{PREFIX}:{{s") or end < 0:
        return ""
    run_id, _, suffix = name[end + 2 :].rpartition(":")
    if suffix not in _RUN_SUFFIXES or not valid_run_id(run_id):
        return ""
    return run_id if _tagged(run_id, suffix) == name else ""


_PAYLOAD_FIELDS = {"ckpt": "checkpoint", "in": "inputs", "mailbox": "signal", "memo": "record"}
RUN_PAYLOADS = ("inputs", "state", "output")
"""The run hash's fields that hold payloads."""


def payload_field(key: object, name: object = "") -> str:
    """Which of a run's payloads the per-run ``key`` (at hash field ``name``) holds, as the payload
    codec binds it (store/payload_codec.py: inputs, state, output, checkpoint, signal, record);
    '' for a key or field that holds none."""
    run_id = run_of(key)
    if not run_id:
        return ""
    suffix = (key.decode() if isinstance(key, bytes) else str(key)).rpartition(":")[2]
    if suffix == "run":
        field = name.decode() if isinstance(name, bytes) else str(name)
        return field if field in RUN_PAYLOADS else ""
    return _PAYLOAD_FIELDS.get(suffix, "")


RUN_HASHES = ("run", "ckpt", "memo", "mailbox")
"""The per-run hashes that may hold payloads (a payload store sweep reads them for references)."""


def every_run_key() -> str:
    """A SCAN pattern that matches every per-run key of every run (and the shards' indexes:
    :func:`run_of` tells them apart)."""
    return f"{PREFIX}:{{s*}}:*"


def run_keys(run_id: str) -> tuple[str, ...]:
    """Every per-run key; retention expires and purge deletes those of them that exist."""
    return (
        run(run_id),
        ckpt(run_id),
        events(run_id),
        tb(run_id),
        memo(run_id),
        mailbox(run_id),
        inputs(run_id),
        stream(run_id),
        lanes(run_id),
        asks(run_id),
    )


def tag_index(key: str, value: str, shard: int) -> str:
    """The shard's runs carrying tag ``key=value``, score = created ms: a listing by tag reads only
    these. Written by ``create_run.lua``; an entry whose run expired is dropped by the listing that
    meets it and by the reaper's prune (store/tag_prune.py). The tag is in the name as its digest
    (core/tags.py keeps ``=`` out of keys and values, so ``key=value`` is unambiguous):
    ``rg:{s<n>}:#tag:<sha1 of key=value>``."""
    return f"{_shard(shard)}:{USER_TEXT}tag:{_digest(f'{key}={value}')}"


def is_tag_index(name: str) -> bool:
    """True for a key :func:`tag_index` built."""
    return name.startswith(f"{PREFIX}:{{s") and f"}}:{USER_TEXT}tag:" in name


def tag_indexes(shard: int) -> str:
    """The names of the shard's tag indexes (a set), added by ``create_run.lua`` with each entry:
    the reaper's prune walks it to drop the entries of expired runs, and a name with them, as an
    index without an entry is no key (store/recovery.py: prune_tag_indexes)."""
    return f"{_shard(shard)}:tags"


def shard_in(name: str) -> int:
    """The shard whose hash tag a shard's key (``rg:{s<n>}:...``) carries."""
    return int(name[len(f"{PREFIX}:{{s") : name.index("}")])


# -- a shard's indexes --------------------------------------------------------------------------


def all_runs(shard: int) -> str:
    """Every run of the shard, score = created ms."""
    return f"{_shard(shard)}:all"


def dead(shard: int) -> str:
    """The shard's dead-letter index, score = dead-lettered ms."""
    return f"{_shard(shard)}:dead"


def leases(shard: int) -> str:
    """The shard's running runs, score = lease expiry ms; the reaper scans it for lapsed leases."""
    return f"{_shard(shard)}:leases"


def due(shard: int) -> str:
    """The shard's runs that need a Celery message sent, score = due ms."""
    return f"{_shard(shard)}:due"


def reaper_lock(shard: int) -> str:
    """Held by the one reaper that acts on the shard now: its lease on the shard (fleet/reaper.py)."""
    return f"{_shard(shard)}:reaper:lock"


def reaper_pass(shard: int) -> str:
    """The shard's last reaper pass: "<epoch ms> <run_id of the Redis server>". A server has a new
    run_id each time it starts (a promoted replica has its own), so the next pass can tell that the
    shard's primary restarted or failed over since then (lua/_pass.lua, marked by each reaper tick)."""
    return f"{_shard(shard)}:reaper:pass"


def retries(shard: int) -> str:
    """The shard's retries of the last hour, a rollup for the console's overview: member
    ``<run_id>|<attempt>``, score = ms the run went retrying. ``lua/_lib.lua`` (to_retrying) adds
    one and drops those older than an hour in the same script, so a run that never retries costs
    nothing. It takes the place of the retrying status set in :func:`script_keys`, which no script
    writes (:func:`status_set`)."""
    return f"{_shard(shard)}:retries"


def children_ended(shard: int) -> str:
    """The child runs of the shard that ended and whose parent is not told yet (score = end ms):
    every script that ends a child adds it (``_lib.lua: set_status``), and the reaper tells the
    parent and removes it (store/children.py), a crash in between only telling it twice."""
    return f"{_shard(shard)}:children:ended"


def events_template(shard: int) -> str:
    """A stream holding one marker entry (id 0-1): each new run's event stream in the shard starts as
    a COPY of it (COPY stays in one slot), which is sized to what it holds, where a new stream's
    first node takes 4 KB (``lua/_lib.lua``)."""
    return f"{_shard(shard)}:events:template"


def status_set(status: Status | str, shard: int) -> str:
    """The shard's runs in one status, score = updated ms; not written for queued, retrying and
    running runs (see :func:`status_index`), whose positions in :func:`script_keys` stay so the
    others hold theirs."""
    return f"{_shard(shard)}:status:{Status(status).value}"


def status_index(status: Status | str, shard: int) -> str:
    """Where the shard's runs of one status are listed: queued and retrying runs from :func:`due`
    (every such run is due: its retry, or the safety net of its message), running runs from
    :func:`leases`, the others from their status set. The due set and the leases hold other
    statuses too, so a listing checks each."""
    found = Status(status)
    if found in (Status.QUEUED, Status.RETRYING):
        return due(shard)
    if found is Status.RUNNING:
        return leases(shard)
    return status_set(found, shard)


def idem_scope(graph: str, idempotency_key: str) -> str:
    """An idempotency key as the store scopes it: per graph, so two graphs never share one."""
    return f"{graph}:{idempotency_key}"


def idem(scope: str) -> str:
    """Maps a scoped idempotency key (:func:`idem_scope`) to the run it created, in the scope's shard:
    ``rg:{s<n>}:#idem:<sha1 of the scope>``."""
    return f"{_shard(shard_of(scope))}:{USER_TEXT}idem:{_digest(scope)}"


# -- the layout before USER_TEXT, for its migration (store/keyspace_migration.py) only ----------


def old_user_text_keys() -> tuple[str, ...]:
    """SCAN patterns of the keys written before :data:`USER_TEXT`: tag indexes and idempotency keys."""
    return (f"{PREFIX}:{{s*}}:tag:*", f"{PREFIX}:{{s*}}:idem:*")


def migrated_name(name: str) -> str:
    """The name a key of the old layout (:func:`old_user_text_keys`) has now, '' for any other key
    (a run's own key that matches the pattern: a run whose id is ``tag`` or ``idem``)."""
    head, sep, rest = name.partition("}:")
    if not head.startswith(f"{PREFIX}:{{s") or not sep:
        return ""
    kind, _, text = rest.partition(":")
    shard = head + "}"
    # A tag index's text holds '=', a scope's a ':' (graph:key); a run key's suffix neither.
    if kind == "tag" and "=" in text:
        return f"{shard}:{USER_TEXT}tag:{_digest(text)}"
    if kind == "idem" and ":" in text:
        return f"{shard}:{USER_TEXT}idem:{_digest(text)}"
    return ""


def worker(name: str) -> str:
    """One worker's description (JSON), written by its full beats and outliving its heartbeat:
    readers take it only for a live worker (:data:`WORKERS`)."""
    return f"{CONTROL}:worker:{name}"


def served(graph: str) -> str:
    """The workers that run ``graph``, score = expiry ms of the entry their last full beat wrote;
    readers take an entry only for a worker live in :data:`WORKERS` (store/workers.py)."""
    return f"{CONTROL}:served:{graph}"


def served_version(graph: str, version: str) -> str:
    """The workers that run ``version`` of ``graph``, as :func:`served` (a graph name holds no '@')."""
    return f"{CONTROL}:served:{graph}@{version}"


def versions(graph: str) -> str:
    """Every version of ``graph`` a worker published: hash version -> JSON (first published, nodes)."""
    return f"{CONTROL}:versions:{graph}"


def held_versions() -> str:
    """The (graph, version) pairs that may have runs held for them (:func:`version_held` in some
    shard): zset ``<graph>@<version>`` -> generation, raised by each hold, so a worker's beat reads
    one key to learn which of its versions to look for, not every shard."""
    return f"{CONTROL}:held_versions"


def version_held(graph: str, version: str, shard: int) -> str:
    """The shard's runs of ``graph`` held waiting for a worker of ``version`` (a set of run ids)."""
    return f"{_shard(shard)}:versions:{graph}:held:{version}"


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


def limit_grant(key: str, member: str) -> str:
    """One acquisition's grant on a cluster store: its start, epoch ms; expires with its slot's
    first lease (``lua/limit_take.lua``), so a retried call takes no second token or slot."""
    return _limit(key, f"grant:{member}")


def limit_take_keys(key: str, member: str) -> list[str]:
    """KEYS of ``lua/limit_take.lua`` (the limit's slot): 1 tat, 2 slots, 3 stats, 4 the grant."""
    return [limit_tat(key), limit_slots(key), limit_stats(key), limit_grant(key, member)]


def limit_granted_keys(run_id: str) -> list[str]:
    """KEYS of ``lua/limit_granted.lua`` (the run's slot): 1 run, 2 events."""
    return [run(run_id), events(run_id)]


def script_keys(run_id: str, idem_guess: str, shards: Shards, extra: Sequence[str] = ()) -> list[str]:
    """KEYS for the per-run scripts, in the positions ``lua/_lib.lua`` expects: the run's keys and
    the indexes of its shard in ``shards``, all of one slot on a cluster (a keyed run's id is in
    its key's shard: :func:`run_id_in`).

    1 run, 2 ckpt, 3 events, 4 tb, 5 idem (built from ``idem_guess``, a scoped key or the
    run id), 6 all, 7 dead, 8 leases, 9 due, 10..16 the status sets in :data:`STATUS_ORDER`
    (12, retrying's, is :func:`retries`), 17 memo, 18 mailbox, then the script's own ``extra``
    keys (19 on), then the run's :func:`asks`, its lanes, the shard's :func:`children_ended`, and
    last the run's long inputs and its stream: the prelude reads them as ``KEYS[#KEYS - 4]`` to
    ``KEYS[#KEYS]``, so no script's own positions move.
    """
    shard = shards.of(run_id)
    # Built from the run's tag and the shard's cached indexes: the functions above, one by one,
    # hashed the run id once per key and named each status anew, some 9 µs a call (per-run
    # scripts are called a few times a run); tests/store/test_layout.py holds the two ways equal.
    tag = _run_tag(run_id)
    return [
        tag + "run",
        tag + "ckpt",
        tag + "events",
        tag + "tb",
        idem(idem_guess),
        *_shard_indexes(shard),
        tag + "memo",
        tag + "mailbox",
        *extra,
        tag + "asks",
        tag + "lanes",
        children_ended(shard),
        tag + "in",
        tag + "stream",
    ]


@cache
def _shard_indexes(shard: int) -> tuple[str, ...]:
    """KEYS 6 to 16 of :func:`script_keys`: the shard's every-run, dead, leases, due and status
    sets (one tuple per shard, :data:`SHARDS` at most)."""
    return (
        all_runs(shard),
        dead(shard),
        leases(shard),
        due(shard),
        *(retries(shard) if s is Status.RETRYING else status_set(s, shard) for s in STATUS_ORDER),
    )


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
