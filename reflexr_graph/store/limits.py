"""Fleet-wide limits in Redis: rate tokens (GCRA) and leased concurrency slots per limit key.

Taking both is one EVALSHA (``lua/limit_acquire.lua``), fenced by the attempt's token; giving a
slot back is one ZREM. Slots expire one lease TTL after their last renewal, so a killed
worker's slots come back on their own (the heartbeat renews the slots an attempt holds).

On a Redis Cluster a limit's keys are in its own slot, not the run's, so a grant is two scripts:
``lua/limit_take.lua`` on the limit's slot takes the token and the slot, then
``lua/limit_granted.lua`` on the run's checks the attempt still owns the run (else the slot goes
back at once) and counts the wait. A crash between the two leaves a slot that no heartbeat
renews, which lapses within a lease TTL; a retried call of the same acquisition (a lost reply)
is given its grant again, not a second token or slot. The index of limit keys is in the control
slot, written once per key and configuration by each process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from reflexr_graph import clock
from reflexr_graph.core.limits import Grant, LimitRequest
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.model import LimitUsage
from reflexr_graph.store import keys
from reflexr_graph.store.base import EVENTS_MAXLEN, _fenced
from reflexr_graph.store.contracts import Acquired, GrantedArgs, LimitArgs, LimitReply, TakeArgs
from reflexr_graph.store.ops import Eval, Op, batch, cmd, layout
from reflexr_graph.store.records import text, text_map


def limit_usage() -> Op[list[LimitUsage]]:
    """Every limit key used so far, with its configuration and its current use (two round trips)."""
    configs = text_map((yield cmd("hgetall", keys.LIMITS)))
    now = clock.now_ms()
    names = sorted(configs)
    commands = []
    for key in names:
        commands += [
            cmd("zcount", keys.limit_slots(key), f"({now}", math.inf),
            cmd("hgetall", keys.limit_stats(key)),
        ]
    replies = (yield batch(commands)) if names else []
    found = []
    for i, key in enumerate(names):
        config = json.loads(configs[key])
        stats = text_map(replies[2 * i + 1])
        found.append(
            LimitUsage(
                key=key,
                rate=config.get("rate"),
                burst=int(config.get("burst") or 1),
                concurrency=config.get("concurrency"),
                in_use=int(replies[2 * i]),
                granted=int(stats.get("granted") or 0),
                denied=int(stats.get("denied") or 0),
                waited_s=int(stats.get("waited_ms") or 0) / 1000,
            )
        )
    return found


INDEXED_LIMITS = 10_000
"""The most limit keys a cluster store's process remembers having indexed (:func:`index_limit`)."""


def give_back(returning: Sequence[tuple[str, str]]) -> Op[None]:
    """Give the slots ``returning`` (limit key, member) back in one pipeline, each a ZREM in its
    limit's slot: a cluster store's step end, whose save or record cannot carry them (its run's
    slot is another)."""
    yield batch([cmd("zrem", keys.limit_slots(key), member) for key, member in returning])


def config_json(request: LimitRequest) -> str:
    return json.dumps(
        {"rate": request.rate, "burst": request.burst, "concurrency": request.concurrency or None},
        separators=(",", ":"),
    )


def acquire(ctx: AttemptContext, request: LimitRequest, *, slot_ttl_ms: int) -> Op[Grant]:
    """One EVALSHA: a grant (maybe of a rate token reserved up to ``request.max_reserve_ms``
    ahead, with the wait before it), or a refusal with the wait the rate requires; FencedOut if
    the attempt no longer owns the run. On a cluster, two scripts (see the module's docstring)."""
    if (yield from layout()).count > 1:
        return (yield from _acquire_in_two_slots(ctx, request, slot_ttl_ms))
    args = LimitArgs(
        token=ctx.token,
        key=request.key,
        node=request.node,
        config=config_json(request),
        events_cap=EVENTS_MAXLEN,
        **vars(_take_args(request, slot_ttl_ms)),
    ).argv()
    found = yield Eval("limit_acquire", keys.limit_keys(ctx.run_id, request.key), args)
    reply = LimitReply.parse([text(v) for v in found])
    if reply.outcome is Acquired.FENCED:
        raise _fenced(ctx, "limit acquisition")
    if reply.outcome is Acquired.OK:
        return Grant(True, wait_ms=reply.wait_ms)
    return Grant(False, retry_after_ms=reply.wait_ms)


def _take_args(request: LimitRequest, slot_ttl_ms: int) -> TakeArgs:
    """The rate and slot part of an acquisition, now: all of limit_take.lua's arguments, and the
    same fields of limit_acquire.lua's (which adds the run's)."""
    now = clock.now_ms()
    return TakeArgs(
        now_ms=now,
        emission_ms=request.emission_ms,
        burst=request.burst,
        concurrency=request.concurrency,
        member=request.member,
        slot_expiry_ms=now + slot_ttl_ms,
        max_reserve_ms=request.max_reserve_ms,
        waited_ms=request.waited_ms,
    )


def _acquire_in_two_slots(ctx: AttemptContext, request: LimitRequest, slot_ttl_ms: int) -> Op[Grant]:
    """A cluster store's grant: the limit's script, then the run's (see the module's docstring)."""
    taken = _take_args(request, slot_ttl_ms).argv()
    found = yield Eval("limit_take", keys.limit_take_keys(request.key, request.member), taken)
    reply = LimitReply.parse([text(v) for v in found])
    if reply.outcome is not Acquired.OK:
        return Grant(False, retry_after_ms=reply.wait_ms)
    granted = GrantedArgs(
        token=ctx.token,
        now_ms=clock.now_ms(),
        key=request.key,
        node=request.node,
        waited_ms=request.waited_ms,
        wait_ms=reply.wait_ms,
        member=request.member,
        events_cap=EVENTS_MAXLEN,
    ).argv()
    counted = [text(v) for v in (yield Eval("limit_granted", keys.limit_granted_keys(ctx.run_id), granted))]
    if Acquired(counted[0]) is Acquired.FENCED:
        yield cmd("zrem", keys.limit_slots(request.key), request.member)
        raise _fenced(ctx, "limit acquisition")
    if int(counted[1]) > 0:  # the run waited for the key before this attempt too
        yield cmd("hincrby", keys.limit_stats(request.key), "waited_ms", int(counted[1]))
    return Grant(True, wait_ms=reply.wait_ms)


def index_limit(request: LimitRequest, indexed: dict[str, str]) -> Op[None]:
    """Name the key and its configuration in the control slot's index (``limit_usage``), once per
    process (``indexed``: the keys this process wrote, with their configuration): a write per grant
    would make the control slot's primary the busiest."""
    config = config_json(request)
    if indexed.get(request.key) == config:
        return
    yield cmd("hset", keys.LIMITS, request.key, config)
    if len(indexed) >= INDEXED_LIMITS:
        indexed.clear()  # keys computed per tenant: keep the memory bounded
    indexed[request.key] = config


def release_slot(key: str, member: str) -> Op[None]:
    """Give one slot of limit ``key`` back (one ZREM)."""
    yield cmd("zrem", keys.limit_slots(key), member)


def renew_slots(held: Mapping[str, str], *, slot_ttl_ms: int) -> Op[None]:
    """Push the expiry of each held slot (member -> key) on: one pipelined round trip.

    ``XX``: a slot that lapsed meanwhile is not brought back, since another step may hold it now.
    """
    if not held:
        return
    expiry = clock.now_ms() + slot_ttl_ms
    yield batch(
        [cmd("zadd", keys.limit_slots(key), {member: expiry}, xx=True) for member, key in held.items()]
    )
