"""Child runs in the store: a step makes a child, waits for it, and its end wakes the parent.

A child is a run with a ``parent`` field, made with an idempotency key named after the parent
run and the step's record of it (core/children.py), so a retried step finds the same child.
The parent keeps one mailbox field per child, ``child:<id>``: '' while the child runs, its
outcome (``{"status", "reason"}``) once it ended. Those fields list the parent's children.

Every script that ends a run notes a child in its shard's ``children:ended`` set, in the same
write (``_lib.lua: set_status``); the reaper then tells the parent (``child_ended.lua``, in the
parent's shard, which may be another) and drops the note. A crash between the two only tells the
parent twice, which changes nothing the second time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from reflexr_graph import clock, errors
from reflexr_graph.core.journal import digest
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.core.tags import Tags
from reflexr_graph.model import TERMINAL, Status
from reflexr_graph.store import keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.base import _fenced, _guess
from reflexr_graph.store.contracts import (
    CancelArgs,
    ChildEndedArgs,
    ChildStartedArgs,
    ToldParent,
    ToldParentReply,
    WaitChildrenArgs,
    WaitChildrenReply,
    WaitedChildren,
)
from reflexr_graph.store.ops import Eval, Op, cmd, layout, per_run
from reflexr_graph.store.records import text
from reflexr_graph.store.settings import StoreSettings

CHILD_FIELD = "child:"
"""The prefix of a parent's mailbox fields, one per child."""


@dataclass(frozen=True)
class ChildRequest:
    """A child run a step asks for: what to run, and the step's record that names it."""

    graph: str
    inputs_json: str
    tags: Tags
    max_attempts: int
    record: str
    """The parent's memo field that records the child (core/children.py)."""
    priority: int | None = None


@dataclass(frozen=True)
class ChildOutcome:
    """How a child ended, as its parent was told."""

    status: Status
    reason: str | None = None

    @classmethod
    def parse(cls, raw: str) -> ChildOutcome:
        found = json.loads(raw)
        return cls(Status(found["status"]), found.get("reason") or None)


def child_key(parent_run_id: str, record: str) -> str:
    """The idempotency key of the child a step's record names: the same on every retry of it."""
    return f"child:{parent_run_id}:{digest(record)}"


def make_child(
    store: StoreSettings, ctx: AttemptContext, request: ChildRequest, *, dispatch_grace_ms: int
) -> Op[tuple[str, bool]]:
    """Make the child (or find the one its key names) and record it in the parent; its run id,
    and whether it was made now (then its message must be sent).

    On one Redis, one script does both, fenced by the parent's token. On a cluster the two are
    in different shards: the child is made first, then the parent's record (``child_started.lua``);
    a crash in between leaves a child that the retried step finds by its key, and records then.
    FencedOut when the parent attempt no longer owns its run; CancelRequested when the parent was
    asked to cancel (then no child is left running: it is made and cancelled at once on a cluster).
    """
    key = child_key(ctx.run_id, request.record)
    shards = yield from layout()
    together = shards.count == 1
    run = NewRun(
        run_id=keys.new_run_id(request.graph, key),
        graph=request.graph,
        inputs_json=request.inputs_json,
        state_json=None,
        idempotency_key=key,
        max_attempts=request.max_attempts,
        dispatch_grace_ms=dispatch_grace_ms,
        trace_context=ctx.trace_context,
        tags=dict(request.tags),
        priority=request.priority,
        parent=ctx.run_id,
        parent_token=ctx.token if together else "",
        parent_field=request.record,
    )
    child_id, created = yield from new_run(run)
    if not together:
        parent = ctx.run_id
        written = yield Eval(
            "child_started",
            [keys.run(parent), keys.memo(parent), keys.mailbox(parent)],
            ChildStartedArgs(ctx.token, request.record, child_id).argv(),
        )
        if not int(written):
            raise _fenced(ctx, "record of its child")
        if int(written) == 2:
            # Cancelled since the child was made: the cascade missed it, so it goes here.
            cancel = CancelArgs(store.options.run_retention_s, False).argv()
            yield from per_run("cancel", child_id, child_id, clock.now_ms(), cancel)
            raise errors.CancelRequested(ctx.run_id)
    return child_id, created


def wait_for_children(ctx: AttemptContext, children: Sequence[str], waiting_for: str) -> Op[list[str] | None]:
    """The outcomes of ``children`` (JSON, in order) when all ended, else None: the run is suspended."""
    args = WaitChildrenArgs(ctx.token, waiting_for, " ".join(children)).argv()
    raw = yield from per_run("wait_children", ctx.run_id, _guess(ctx), clock.now_ms(), args)
    reply = WaitChildrenReply.parse([text(v) for v in raw])
    if reply.outcome is WaitedChildren.FENCED:
        raise _fenced(ctx, "wait for its children")
    if reply.outcome is WaitedChildren.CANCELLED:
        raise errors.CancelRequested(ctx.run_id, ended=True)
    if reply.outcome is WaitedChildren.ENDED:
        return reply.outcomes
    return None


def tell_parent(child_id: str) -> Op[tuple[str, str] | None]:
    """Tell the parent of an ended child, then drop the note; ``(parent, graph)`` when that queued
    the parent (its message is due now), else None."""
    shards = yield from layout()
    found = yield cmd("hmget", keys.run(child_id), "parent", "status", "reason")
    parent, status, reason = ("" if v is None else text(v) for v in found)
    woke: tuple[str, str] | None = None
    if parent and status and Status(status) in TERMINAL:
        outcome = json.dumps({"status": status, "reason": reason or None})
        args = ChildEndedArgs(child_id, outcome).argv()
        raw = yield from per_run("child_ended", parent, parent, clock.now_ms(), args)
        told = ToldParentReply.parse([text(v) for v in raw])
        if told.outcome is ToldParent.QUEUED:
            woke = (parent, told.detail)
    yield cmd("zrem", keys.children_ended(shards.of(child_id)), child_id)
    return woke


def children_of(run_id: str) -> Op[dict[str, ChildOutcome | None]]:
    """The children of a run, each with its outcome once it ended (None while it runs)."""
    found = yield cmd("hgetall", keys.mailbox(run_id))
    children: dict[str, ChildOutcome | None] = {}
    for name, value in found.items():
        name, value = text(name), text(value)
        if name.startswith(CHILD_FIELD):
            children[name.removeprefix(CHILD_FIELD)] = ChildOutcome.parse(value) if value else None
    return children


def child_output(child_id: str) -> Op[str | None]:
    """A child's output JSON, as its record keeps it (None once its record is gone)."""
    found = yield cmd("hget", keys.run(child_id), "output")
    return None if found is None else text(found)
