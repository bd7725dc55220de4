"""Document triage: plan, classify every document in parallel, decide, report.

    plan -> map over documents -> classify (each) -> join -> assess -> decision
         -> escalate (urgent) | file (routine) -> end

With ``require_approval``, escalate pages an on-call engineer and waits for the signal
``approval`` (reflexr-graph signal RUN approval --value '{"approved": true, "by": "ana"}')
before it escalates. The run waits as ``waiting``, holding no worker; with
``approval_timeout_s`` it escalates without an answer once that time has passed.

Checkpoints land after plan (before the map), after the join (before assess), and before
each report step, so a crash while classifying repeats only the classification, and a
crash while reporting repeats nothing but the report.

Knobs for demos (``reflexr-graph demo``, the README):

- ``latency_s`` (inputs): simulated model latency of each classification, to leave time
  to kill a worker mid-step; ``report_latency_s`` does the same for the report step.
- ``require_approval`` and ``approval_timeout_s`` (inputs): see above.
- ``fail_until_fixed`` (inputs): classification fails until the Redis key
  ``triage:demo:fixed`` exists. Enqueue such a run, watch it use up its attempts and land
  in the dead-letter queue, ``SET triage:demo:fixed 1``, then ``reflexr-graph dlq replay``.
"""

from __future__ import annotations

import asyncio
import hashlib
from functools import cache
from typing import Literal

import redis
from pydantic import BaseModel, Field
from pydantic_graph import GraphBuilder, StepContext, reduce_list_append

from reflexr_graph import GraphAction, RunFailure, SignalTimeout, current_run, durable_call, wait_for_signal
from reflexr_graph.config.settings import Settings

FIXED_KEY = "triage:demo:fixed"
"""While a ``fail_until_fixed`` run's classifier is "broken", this key is absent."""
EXECUTIONS_KEY = "triage:demo:executions:{run_id}"
"""Hash node -> how many times it ran for one run, so a demo can show what a crash repeated."""
EXECUTIONS_TTL_S = 7 * 24 * 3600

URGENT_WORDS = ("outage", "breach", "down", "lawsuit", "urgent", "security", "data loss")
CATEGORIES: dict[str, tuple[str, ...]] = {
    "incident": ("outage", "down", "error", "latency", "data loss"),
    "security": ("breach", "phishing", "security", "vulnerability"),
    "legal": ("lawsuit", "contract", "gdpr", "subpoena"),
    "billing": ("invoice", "refund", "charge", "payment"),
}


class Document(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    title: str = Field(max_length=500)
    body: str = ""


class TriageInputs(BaseModel):
    documents: list[Document] = Field(min_length=1, max_length=500)
    latency_s: float = Field(0.0, ge=0, le=60, description="simulated classification latency per document")
    fail_until_fixed: bool = Field(False, description=f"classification fails until {FIXED_KEY} is set")
    report_latency_s: float = Field(0.0, ge=0, le=120, description="simulated latency of the report step")
    require_approval: bool = Field(False, description="escalate waits for the signal 'approval' first")
    approval_timeout_s: float | None = Field(
        None, gt=0, description="escalate without an answer after this long (default: wait until signalled)"
    )


class TriageState(BaseModel):
    latency_s: float = 0.0
    report_latency_s: float = 0.0
    fail_until_fixed: bool = False
    require_approval: bool = False
    approval_timeout_s: float | None = None
    planned: int = 0


class Classification(BaseModel):
    document_id: str
    category: str
    urgency: int = Field(ge=0, le=10)
    request_key: str
    """The idempotency key the (simulated) model call was made with."""


class Urgent(BaseModel):
    kind: Literal["urgent"] = "urgent"
    items: list[Classification]


class Routine(BaseModel):
    kind: Literal["routine"] = "routine"
    items: list[Classification]


class Approval(BaseModel):
    """The on-call engineer's answer to an escalation: the value of the signal ``approval``."""

    approved: bool
    by: str = Field(min_length=1, max_length=200)
    note: str = Field("", max_length=2000)


class TriageReport(BaseModel):
    verdict: Literal["urgent", "routine"]
    documents: int
    urgent_documents: list[str]
    by_category: dict[str, int]
    report_key: str
    approval: str | None = None
    """What the on-call engineer decided, when the run asked: ``approved by ana``, ``declined by ana``,
    or that no answer came in time."""


@cache
def _redis() -> redis.Redis:
    # One client per process, on the fleet's own Redis (REFLEXR_REDIS_URL).
    return redis.Redis.from_url(Settings().redis_url, socket_timeout=5)


def _ran(node: str) -> None:
    """Count this execution of ``node`` (demo bookkeeping; see :func:`executions`)."""
    key = EXECUTIONS_KEY.format(run_id=current_run().run_id)
    pipe = _redis().pipeline(transaction=False)
    pipe.hincrby(key, node, 1)
    pipe.expire(key, EXECUTIONS_TTL_S)
    pipe.execute()


def executions(client: redis.Redis, run_id: str) -> dict[str, int]:
    """How many times each step of run ``run_id`` ran, across every attempt and worker."""
    raw = client.hgetall(EXECUTIONS_KEY.format(run_id=run_id))
    return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}


def _check_classifier(state: TriageState) -> None:
    if state.fail_until_fixed and not _redis().exists(FIXED_KEY):
        raise RunFailure(f"classifier unavailable (demo): SET {FIXED_KEY} 1 to fix it, then replay the run")


def _classify(doc: Document, request_key: str) -> Classification:
    text = f"{doc.title} {doc.body}".lower()
    category = next((c for c, words in CATEGORIES.items() if any(w in text for w in words)), "general")
    hits = sum(word in text for word in URGENT_WORDS)
    # A stable tie-breaker stands in for a model's judgement, so reruns agree.
    jitter = int(hashlib.sha256(doc.id.encode()).hexdigest(), 16) % 2
    return Classification(
        document_id=doc.id, category=category, urgency=min(10, 4 * hits + jitter), request_key=request_key
    )


def build() -> GraphAction:
    g = GraphBuilder(name="triage", state_type=TriageState, input_type=TriageInputs, output_type=TriageReport)

    @g.step
    async def plan(ctx: StepContext[TriageState, None, TriageInputs]) -> list[Document]:
        _ran("plan")
        unique = {doc.id: doc for doc in ctx.inputs.documents}
        ctx.state.latency_s = ctx.inputs.latency_s
        ctx.state.report_latency_s = ctx.inputs.report_latency_s
        ctx.state.fail_until_fixed = ctx.inputs.fail_until_fixed
        ctx.state.require_approval = ctx.inputs.require_approval
        ctx.state.approval_timeout_s = ctx.inputs.approval_timeout_s
        ctx.state.planned = len(unique)
        return list(unique.values())

    @g.step
    async def classify(ctx: StepContext[TriageState, None, Document]) -> Classification:
        # Idempotency key per document: a classification repeated after a crash is the same request.
        request_key = f"{current_run().idempotency_key}:classify:{ctx.inputs.id}"
        _ran("classify")
        _check_classifier(ctx.state)
        if ctx.state.latency_s:
            await asyncio.sleep(ctx.state.latency_s)
        return _classify(ctx.inputs, request_key)

    collect = g.join(reduce_list_append, initial_factory=list[Classification])

    @g.step
    async def assess(ctx: StepContext[TriageState, None, list[Classification]]) -> Urgent | Routine:
        _ran("assess")
        items = sorted(ctx.inputs, key=lambda c: c.document_id)
        if any(c.urgency >= 7 for c in items):
            return Urgent(items=items)
        return Routine(items=items)

    @g.step
    async def escalate(ctx: StepContext[TriageState, None, Urgent]) -> TriageReport:
        approval = await _ask_on_call(ctx.state, ctx.inputs.items) if ctx.state.require_approval else None
        report = await _report("escalate", ctx.state, "urgent", ctx.inputs.items)
        return report.model_copy(update={"approval": approval})

    @g.step
    async def file(ctx: StepContext[TriageState, None, Routine]) -> TriageReport:
        return await _report("file", ctx.state, "routine", ctx.inputs.items)

    decide = (
        g.decision(node_id="decide").branch(g.match(Urgent).to(escalate)).branch(g.match(Routine).to(file))
    )
    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(classify),
        g.edge_from(classify).to(collect),
        g.edge_from(collect).to(assess),
        g.edge_from(assess).to(decide),
        g.edge_from(escalate, file).to(g.end_node),
    )
    return GraphAction(g.build(), signals={"approval": Approval})


def _page(urgent: list[str]) -> str:
    """Page the on-call engineer (simulated): a side effect, made once per run however often it waits."""
    _ran("page")
    return f"paged on-call about {', '.join(urgent)}"


async def _ask_on_call(state: TriageState, items: list[Classification]) -> str:
    """Page on-call once, then wait, holding no worker, for the signal ``approval``."""
    await durable_call("page", _page, [c.document_id for c in items if c.urgency >= 7])
    try:
        answer = await wait_for_signal("approval", Approval, timeout=state.approval_timeout_s)
    except SignalTimeout:
        return f"no answer within {state.approval_timeout_s:g}s: escalated without approval"
    return f"{'approved' if answer.approved else 'declined'} by {answer.by}"


async def _report(
    node: str, state: TriageState, verdict: Literal["urgent", "routine"], items: list[Classification]
) -> TriageReport:
    _ran(node)
    if state.report_latency_s:
        await asyncio.sleep(state.report_latency_s)
    by_category: dict[str, int] = {}
    for item in items:
        by_category[item.category] = by_category.get(item.category, 0) + 1
    return TriageReport(
        verdict=verdict,
        documents=len(items),
        urgent_documents=[c.document_id for c in items if c.urgency >= 7],
        by_category=dict(sorted(by_category.items())),
        report_key=f"{current_run().idempotency_key}:report",
    )


triage = build()
