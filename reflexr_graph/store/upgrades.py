"""Upgrades (G9): move the runs of a graph version to the newest version a live worker serves.

A run held for its version (no live worker serves it) moves at once; with ``include_running``, a
live run of the version moves too: a queued, retrying or waiting one at once, a running one once its
attempt ends (upgrade.lua marks it; claim.lua refuses its next attempt on any other version, and
a worker of the new version moves it at its beat, fleet/versions.py). Without ``code`` (the new
version's GraphAction) every run starts over from its first step, the seed's rule for a changed
graph. With it, a run whose latest checkpoint the new graph reads (core/compat.py ``judge``, the
check ``check-checkpoints`` makes) resumes from it, written over to the new version (``rebase``),
with the records of the work finished since it; any other starts over, or, with
``hold_incompatible`` (an auto-upgrade of a graph with ``on_incompatible="hold"``,
fleet/auto_upgrade.py), stays where it is, saying why.
"""

from __future__ import annotations

from pydantic import BaseModel

from reflexr_graph import clock, errors
from reflexr_graph.core import metrics
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.compat import judge, rebase
from reflexr_graph.core.tracing import ATTR_GRAPH
from reflexr_graph.model import Move, RunInfo, Status, UpgradePlan
from reflexr_graph.store import keys
from reflexr_graph.store.contracts import UpgradeArgs
from reflexr_graph.store.ops import Op, cmd, layout, per_run
from reflexr_graph.store.reads import runs_listing
from reflexr_graph.store.records import text
from reflexr_graph.store.versions import held_runs, latest_checkpoints, served_versions

NO_RESUME = "--resume-compatible not given: it starts over from its first step"
NO_CHECKPOINT = "no checkpoint yet: it starts from its first step either way"
ENDED = (Status.QUEUED, Status.RETRYING, Status.WAITING)
"""Live runs with no attempt running: they move at once, as held ones do (one waiting for a signal
or a timer goes on waiting, on the new version, if it resumes)."""
LIVE_SCAN = 10_000
"""At most this many live runs of each status are looked at."""


def _newest(graph: str, from_version: str, code: GraphAction | None) -> Op[str]:
    served = yield from served_versions(graph)
    if not served:
        raise errors.OperationRefused(
            f"no worker ever published a version of graph {graph!r}: check its name "
            "(`reflexr-graph graphs` lists the published graphs)"
        )
    if from_version not in {v.version for v in served}:
        raise errors.OperationRefused(
            f"graph {graph!r} has no version {from_version!r}: `reflexr-graph versions {graph}` lists "
            "its versions (a fingerprint is given whole)"
        )
    live = [v.version for v in served if v.workers]
    if not live:
        raise errors.OperationRefused(
            f"no live worker serves graph {graph!r}: start one of the new version first"
        )
    if live[0] == from_version:
        raise errors.OperationRefused(
            f"version {from_version} is the newest version of graph {graph!r} a live worker serves: "
            "there is nothing newer to move its runs to"
        )
    if code is not None and (code.name, code.version) != (graph, live[0]):
        raise errors.OperationRefused(
            f"--resume-compatible judges checkpoints with the new version's code: the newest version "
            f"of graph {graph!r} a live worker serves is {live[0]}, and the code here is version "
            f"{code.version} of graph {code.name!r} (set REFLEXR_GRAPHS to the new version's)"
        )
    return live[0]


def _live(graph: str, version: str, statuses: tuple[Status, ...]) -> Op[list[RunInfo]]:
    found = []
    for status in statuses:
        found += (yield from runs_listing(status, graph, LIVE_SCAN, scan=None)).runs
    return [i for i in found if i.version == version]


def _judged(run_ids: list[str], code: GraphAction | None) -> Op[list[tuple[Move, str, str]]]:
    """Each run's move, with the checkpoint it resumes from as the new version's and the seq of the
    one that replaces ('' and '' when it starts over)."""
    if code is None:
        return [(Move(run_id=r, resumes=False, reason=NO_RESUME), "", "") for r in run_ids]
    judged = []
    for run_id, (seq, body, inputs) in zip(run_ids, (yield from latest_checkpoints(run_ids)), strict=True):
        verdict = judge(code, body, inputs)
        if body is None or not verdict.resumes:
            judged.append((Move(run_id=run_id, resumes=False, reason=verdict.reason), "", ""))
        else:
            judged.append((Move(run_id=run_id, resumes=True, reason=verdict.reason), rebase(code, body), seq))
    return judged


def upgrade_plan(
    graph: str, from_version: str, *, code: GraphAction | None = None, include_running: bool = False
) -> Op[UpgradePlan]:
    """What an upgrade would move, where to, and whether each run would resume (with ``code``, the
    new version's GraphAction) or start over; OperationRefused when no newer version is served or
    ``code`` is not of it."""
    to = yield from _newest(graph, from_version, code)
    runs = set((yield from held_runs(graph, from_version)))
    running: list[str] = []
    if include_running:
        runs |= {i.run_id for i in (yield from _live(graph, from_version, ENDED))}
        running = sorted(i.run_id for i in (yield from _live(graph, from_version, (Status.RUNNING,))))
    ordered = sorted(runs - set(running))
    moves = [move for move, _, _ in (yield from _judged(ordered, code))]
    return UpgradePlan(
        graph=graph, from_version=from_version, to_version=to, run_ids=ordered, moves=moves, running=running
    )


def upgrade_run(
    run_id: str,
    graph: str,
    versions: tuple[str, str],
    *,
    resume_with: str = "",
    replaces_seq: str = "",
    mark: str = "",
    held_because: str = "",
    by: str = "",
) -> Op[str]:
    """upgrade.lua for one run: 'upgraded' (from its first step), 'resumed', 'marked' (with ``mark``),
    'kept' (left held, with ``held_because``; 'still' when it was before), 'running' (its attempt
    goes on), 'skip' (neither held nor marked, or its checkpoint changed), 'gone'."""
    from_version, to_version = versions
    shard = (yield from layout()).of(run_id)
    args = UpgradeArgs(from_version, to_version, resume_with, replaces_seq, mark, held_because, by).argv()
    held = [keys.version_held(graph, from_version, shard)]
    return text((yield from per_run("upgrade", run_id, run_id, clock.now_ms(), args, held)))


def mark_of(from_version: str, resume_compatible: bool, hold_incompatible: bool = False, by: str = "") -> str:
    """A moving run's mark: whether it resumes if compatible ('1'; '2': and is left held if not),
    'a' when an auto-upgrade marked it (``by``), and the version it leaves."""
    flag = 2 if resume_compatible and hold_incompatible else int(resume_compatible)
    return f"{flag}{'a' if by == AUTO else ''}:{from_version}"


def read_mark(mark: str) -> tuple[Moving, str]:
    """How a run marked with ``mark`` (:func:`mark_of`) moves, without its code, and the version it leaves."""
    flag, _, from_version = mark.partition(":")
    how = Moving(hold_incompatible=flag.startswith("2"), by=AUTO if flag.endswith("a") else "")
    return how, from_version


AUTO = "auto_upgrade"
"""Who moves a run that moves by itself (``GraphAction(on_new_version="auto_upgrade")``)."""


class Moving(BaseModel):
    """How :func:`move_runs` moves runs: judged by ``code`` (the new version's GraphAction; None:
    every run starts over), one the new graph cannot read left held with ``hold_incompatible``,
    and who moves them (``by``: 'auto_upgrade', or '' for an operator)."""

    model_config = {"arbitrary_types_allowed": True}

    code: GraphAction | None = None
    hold_incompatible: bool = False
    by: str = ""


def move_runs(
    graph: str, versions: tuple[str, str], run_ids: list[str], how: Moving
) -> Op[tuple[list[Move], list[Move]]]:
    """Judge and move each run (one still running, or not held nor marked any more, stays):
    ``(the moves made, the runs left held as incompatible)``."""
    done, kept = [], []
    for move, resume_with, seq in (yield from _judged(run_ids, how.code)):
        held_because = "" if move.resumes or not how.hold_incompatible else _cannot(versions[1], move.reason)
        outcome = yield from upgrade_run(
            move.run_id, graph, versions, resume_with=resume_with, replaces_seq=seq,
            held_because=held_because, by=how.by,
        )  # fmt: skip
        if outcome in ("kept", "still"):
            kept.append(move.model_copy(update={"newly": outcome == "kept"}))
        if outcome in ("resumed", "upgraded"):
            done.append(move)
            attrs = {ATTR_GRAPH: graph, metrics.ATTR_VERSION: versions[1]}
            metrics.RUNS_UPGRADED.add(1, {**attrs, metrics.ATTR_OUTCOME: _OUTCOMES[outcome]})
    return done, kept


def _cannot(to_version: str, reason: str) -> str:
    return f"version {to_version} cannot resume it: {reason}"


_OUTCOMES = {"resumed": "resumed", "upgraded": "restarted"}


def upgrade(
    graph: str,
    from_version: str,
    *,
    code: GraphAction | None = None,
    include_running: bool = False,
    hold_incompatible: bool = False,
    by: str = "",
) -> Op[UpgradePlan]:
    """Move the runs of ``from_version`` to the newest served version (see :func:`upgrade_plan`):
    the plan's ``run_ids`` and ``moves`` are the runs moved (one claimed or cancelled meanwhile
    stays), its ``running`` those marked to move once their attempt ends, its ``kept`` those left
    held with ``hold_incompatible`` (the operator's command and an auto-upgrade both move here)."""
    plan = yield from upgrade_plan(graph, from_version, code=code, include_running=include_running)
    versions = (from_version, plan.to_version)
    how = Moving(code=code, hold_incompatible=hold_incompatible and code is not None, by=by)
    marked = []
    if include_running:
        # Every live run is marked first: one whose attempt began meanwhile moves when it ends.
        mark = mark_of(from_version, code is not None, how.hold_incompatible, by)
        for run_id in [*plan.run_ids, *plan.running]:
            if (yield from upgrade_run(run_id, graph, versions, mark=mark)) == "marked":
                marked.append(run_id)
    moves, kept = yield from move_runs(graph, versions, plan.run_ids, how)
    moved = {m.run_id for m in [*moves, *kept]}
    running = [r for r in marked if r not in moved]
    update = {"run_ids": [m.run_id for m in moves], "moves": moves, "running": running, "kept": kept}
    return plan.model_copy(update=update)


def move_marked(run_id: str, graph: str, code: GraphAction) -> Op[tuple[str, Move] | None]:
    """Move a run ``upgrade --include-running`` marked to ``code``'s version, once its attempt is
    over, judged by ``code`` when the upgrade resumes runs: ``(version it left, the move)``; None
    when it is not marked any more or did not move (it stays marked, and is looked at again)."""
    to, mark = yield cmd("hmget", keys.run(run_id), "upgrade_to", "upgrade_mark")
    if mark is None or to is None or text(to) != code.version:
        return None
    how, from_version = read_mark(text(mark))
    resume = not text(mark).startswith("0")
    how = how.model_copy(update={"code": code if resume else None})
    moves, _ = yield from move_runs(graph, (from_version, code.version), [run_id], how)
    return (from_version, moves[0]) if moves else None
