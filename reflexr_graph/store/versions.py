"""Graph versions (G9): which versions of a graph were published, which live workers serve, and
the runs held waiting for a worker of their version.

A version is ``GraphAction.version``: the user's label, else the graph's fingerprint. Every
worker publishes the versions it runs (``rg:versions:<graph>``, first publication kept) and
beats into ``rg:served:<graph>@<version>`` beside its graph's set (store/workers.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from reflexr_graph import clock
from reflexr_graph.model import ServedVersion, VersionEntry
from reflexr_graph.store import keys
from reflexr_graph.store.contracts import HoldVersionArgs, UnholdArgs, VersionHold, WakeVersionArgs
from reflexr_graph.store.ops import Eval, Op, batch, cmd, layout, per_run
from reflexr_graph.store.records import (
    LATEST_CHECKPOINT,
    checkpoint_field,
    finished_checkpoint,
    from_output,
    text,
)
from reflexr_graph.store.workers import live_servers, served_reads


def published_versions(graph: str) -> Op[list[VersionEntry]]:
    """Every version of ``graph`` ever published, newest first (one round trip)."""
    raw = yield cmd("hgetall", keys.versions(graph))
    entries = [VersionEntry.model_validate_json(text(v)) for v in raw.values()]
    return sorted(entries, key=lambda e: (e.first_published_at, e.version), reverse=True)


def served_versions(graph: str) -> Op[list[ServedVersion]]:
    """Every published version of ``graph``, newest first, with its live workers (two round trips)."""
    entries = yield from published_versions(graph)
    if not entries:
        return []
    replies = yield batch(served_reads([keys.served_version(graph, e.version) for e in entries]))
    return [
        ServedVersion(**e.model_dump(), workers=tuple(names))
        for e, names in zip(entries, live_servers(replies), strict=True)
    ]


def live_versions(graph: str) -> Op[dict[str, list[str]]]:
    """Each published version of ``graph`` -> the live workers that serve it, newest first (two)."""
    return {v.version: list(v.workers) for v in (yield from served_versions(graph))}


def publish(pairs: list[tuple[str, VersionEntry]], reconcile: bool) -> Op[None]:
    """Versions.publish_versions: every (graph, entry) by HSETNX in one pipeline; with ``reconcile``,
    each one kept is read, and written again with this entry's behaviour if it had another."""
    added = yield batch([cmd("hsetnx", keys.versions(g), e.version, e.model_dump_json()) for g, e in pairs])
    kept = [(graph, entry) for (graph, entry), new in zip(pairs, added, strict=True) if not new]
    if not reconcile:
        return
    stored = []
    for graph, entry in kept:  # a round trip each, as publish_versions has always read them
        stored.append((yield cmd("hget", keys.versions(graph), entry.version)))
    for (graph, entry), raw in zip(kept, stored, strict=True):
        old = VersionEntry.model_validate_json(text(raw)) if raw is not None else None
        if old is not None and old.behaviour() != entry.behaviour():
            behaviour = {"on_new_version": entry.on_new_version, "on_incompatible": entry.on_incompatible}
            mine = old.model_copy(update=behaviour)
            yield cmd("hset", keys.versions(graph), entry.version, mine.model_dump_json())


def held_sample(graph: str, version: str, limit: int) -> Op[list[str]]:
    """Up to ``limit`` runs held waiting for ``version`` of ``graph``: an SRANDMEMBER per shard."""
    shards = yield from layout()
    found: list[bytes | str] = []
    for n in shards.all:
        found += (yield cmd("srandmember", keys.version_held(graph, version, n), limit)) or []
    return sorted(text(r) for r in found)[:limit]


def held_runs(graph: str, version: str) -> Op[list[str]]:
    """The runs held for ``version`` of ``graph`` (waiting for it, or in their grace period)."""
    shards = yield from layout()
    found = yield batch([cmd("smembers", keys.version_held(graph, version, n)) for n in shards.all])
    return sorted(text(r) for members in found for r in members)


def held_versions() -> Op[dict[tuple[str, str], int]]:
    """Each (graph, version) that may have runs held for it -> its generation (one command)."""
    marked = yield cmd("zrange", keys.held_versions(), 0, -1, withscores=True)
    return {_unpair(text(member)): int(generation) for member, generation in marked}


class StoredCheckpoint(BaseModel):
    """A live or held run's latest checkpoint, as ``export`` writes it and ``check-checkpoints`` reads it."""

    run_id: str
    status: str
    version: str | None = None
    checkpoint: str | None = None
    """Its JSON; None before the run's first checkpoint."""
    inputs: str | None = None
    """The run's recorded inputs (JSON), which a checkpoint with ``inputs_ref`` resumes with."""


def _either(inline: bytes | str | None, kept: bytes | str | None) -> str | None:
    value = inline if inline is not None else kept
    return None if value is None else text(value)


def latest_checkpoints(run_ids: list[str]) -> Op[list[tuple[str, str | None, str | None]]]:
    """``(seq, checkpoint JSON, run inputs JSON)`` of each run's latest checkpoint (two round trips,
    a third for a succeeded run's finished checkpoint kept as its entry alone); seq '' and None for
    a run with none yet."""
    if not run_ids:
        return []
    heads = yield batch([cmd("hmget", keys.run(r), LATEST_CHECKPOINT, "inputs") for r in run_ids])
    seqs = [text(latest or b"") for latest, _ in heads]
    # Long inputs are a key of their own (keys.inputs); short ones came with the head.
    replies = yield batch(
        [
            c
            for r, seq in zip(run_ids, seqs, strict=True)
            for c in (cmd("hget", keys.ckpt(r), seq or "-"), cmd("get", keys.inputs(r)))
        ]
    )
    bodies = [None if body is None else text(body) for body in replies[0::2]]
    # A succeeded run's finished checkpoint may be kept as its entry alone: made of the run hash.
    bare = [i for i, (seq, body) in enumerate(zip(seqs, bodies, strict=True)) if seq and body is None]
    if bare:
        parts = yield batch(
            [
                cmd("hmget", keys.run(run_ids[i]), checkpoint_field(seqs[i]), "graph", "version", "output")
                for i in bare
            ]
        )
        for i, (entry, graph, version, output) in zip(bare, parts, strict=True):
            if entry is not None and from_output(text(entry)):
                bodies[i] = finished_checkpoint(text(graph), text(version), seqs[i], text(output))
    return [
        (seq, body, _either(inline, kept))
        for seq, body, kept, (_, inline) in zip(seqs, bodies, replies[1::2], heads, strict=True)
    ]


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def publish_versions(
    entries: Iterable[VersionEntry], graphs: Iterable[str], *, reconcile: bool = False
) -> Op[None]:
    """Record each version the first time it is published (HSETNX: a restart keeps the date).

    With ``reconcile`` (a worker's first publication), a version already recorded with another
    behaviour (``on_new_version``, ``on_incompatible``) takes this one's, its date kept: the
    behaviour is not part of the version, and the latest deploy's choice is the one that holds.
    """
    return publish(list(zip(graphs, entries, strict=True)), reconcile)


def stored_checkpoints(runs: Sequence[tuple[str, str, str | None]]) -> Op[list[StoredCheckpoint]]:
    """The latest checkpoint and inputs of each ``(run_id, status, version)``, in two round trips."""
    found = yield from latest_checkpoints([run_id for run_id, _, _ in runs])
    return [
        StoredCheckpoint(run_id=run_id, status=status, version=version, checkpoint=body, inputs=inputs)
        for (run_id, status, version), (_, body, inputs) in zip(runs, found, strict=True)
    ]


def hold_version(run_id: str, graph: str, version: str, *, grace_ms: int, recheck_ms: int) -> Op[VersionHold]:
    """Keep a run of a version no live worker serves (hold_version.lua): looked at again within
    ``grace_ms``, then ``waiting`` for ``version:<v>``, holding no message and no due entry.

    A run held is then marked in :func:`keys.held_versions`, apart (it lies in the control slot,
    not the run's): a crash between the two leaves the message unacknowledged, and its
    redelivery holds the run, and marks it, again.
    """
    now = clock.now_ms()
    args = HoldVersionArgs(version, grace_ms, now + recheck_ms).argv()
    held = [keys.version_held(graph, version, (yield from layout()).of(run_id))]
    hold = VersionHold(text((yield from per_run("hold_version", run_id, run_id, now, args, held))))
    if hold in (VersionHold.BEGAN, VersionHold.HELD, VersionHold.WAITING):
        yield cmd("zincrby", keys.held_versions(), 1, _pair(graph, version))
    return hold


def unhold_version(graph: str, version: str, generation: int) -> Op[bool]:
    """Strike (graph, version) off ``held_versions`` once no shard holds a run for it, unless a
    hold marked it since ``generation`` was read (unhold_version.lua)."""
    pair = _pair(graph, version)
    return bool((yield Eval("unhold_version", [keys.held_versions()], UnholdArgs(pair, generation).argv())))


def wake_version(run_id: str, graph: str, version: str, *, due_ms: int) -> Op[bool]:
    """Queue a run held for ``version`` again (wake_version.lua); False when it no longer waits."""
    now = clock.now_ms()
    args = WakeVersionArgs(version, now + due_ms).argv()
    held = [keys.version_held(graph, version, (yield from layout()).of(run_id))]
    return text((yield from per_run("wake_version", run_id, run_id, now, args, held))) == "queued"


def _pair(graph: str, version: str) -> str:
    # A graph name holds no '@' (keys.served_version), so the first one splits the pair.
    return f"{graph}@{version}"


def _unpair(member: str) -> tuple[str, str]:
    graph, _, version = member.partition("@")
    return graph, version


def entry_of(
    version: str,
    fingerprint: str,
    label: str | None,
    nodes: Sequence[str],
    behaviour: tuple[str, str] = ("pinned", "hold"),
) -> VersionEntry:
    """The entry a worker publishes for its version of a graph, dated now, with its ``behaviour``
    (``on_new_version``, ``on_incompatible``)."""
    return VersionEntry(
        version=version,
        fingerprint=fingerprint,
        label=label,
        first_published_at=clock.now(),
        nodes=tuple(nodes),
        on_new_version=behaviour[0],
        on_incompatible=behaviour[1],
    )
