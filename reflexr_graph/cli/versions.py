"""Graph versions (G9): ``versions``, ``export`` and ``check-checkpoints``.

``check-checkpoints MODULE:ATTR`` says, for each live or held run of that graph, whether its
stored checkpoint would resume under the graph as this code defines it, or start over, and
why; it exits 1 when any would start over, so CI can run it before a deploy. ``--dump FILE``
reads the checkpoints ``export GRAPH`` wrote, with no connection to the fleet's Redis.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, YesOpt, app, client_of, confirm
from reflexr_graph.cli.failures import CommandFailed
from reflexr_graph.client import Client
from reflexr_graph.core.compat import judge
from reflexr_graph.errors import InvalidInputs
from reflexr_graph.graph_registry import resolve
from reflexr_graph.model import Status, UpgradePlan
from reflexr_graph.store.versions import StoredCheckpoint

LIVE = (Status.QUEUED, Status.RUNNING, Status.RETRYING, Status.WAITING)
"""The runs whose checkpoints a deploy may meet: not finished."""
SCAN_LIMIT = 10_000
"""At most this many runs of each status are read."""


class Dump(BaseModel):
    """What ``export GRAPH`` writes: the latest checkpoint of each live or held run."""

    graph: str
    checkpoints: list[StoredCheckpoint]


def _runs(client: Client, graph: str, statuses: tuple[Status, ...]) -> list[tuple[str, str, str | None]]:
    found = [i for s in statuses for i in client.runs(status=s, graph=graph, limit=SCAN_LIMIT)]
    return [(i.run_id, i.status.value, i.version) for i in found]


def _dump(client: Client, graph: str) -> Dump:
    return Dump(graph=graph, checkpoints=client.store.stored_checkpoints(_runs(client, graph, LIVE)))


@app.command("export")
def export(
    ctx: typer.Context,
    graph: Annotated[str, typer.Argument(metavar="GRAPH", help="Name of a published graph.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write the latest checkpoint of every live and held run of GRAPH as JSON, for
    `check-checkpoints --dump FILE` in CI."""
    text = _dump(client_of(ctx), graph).model_dump_json(indent=2)
    if output is None:
        print(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        render.err.print(f"wrote the checkpoints of graph {graph!r} to {output}")


def _read_dump(path: Path) -> Dump:
    try:
        return Dump.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise InvalidInputs(
            f"--dump {path}: not a file that `reflexr-graph export` wrote ({type(exc).__name__})"
        ) from None


@app.command("check-checkpoints")
def check_checkpoints(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="MODULE:ATTR", help="The graph as the code to deploy defines it.")
    ],
    dump: Annotated[
        Path | None,
        typer.Option("--dump", metavar="FILE", help="Read the checkpoints `export GRAPH` wrote, not Redis."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Say, for each live and held run, whether it would resume under this code or start over;
    exit 1 when any would start over."""
    action = resolve(ref)
    found = _read_dump(dump) if dump is not None else _dump(client_of(ctx), action.name)
    if found.graph != action.name:
        raise InvalidInputs(f"--dump holds graph {found.graph!r}, not {action.name!r}")
    verdicts = [(c, judge(action, c.checkpoint, c.inputs)) for c in found.checkpoints]
    rows: list[dict[str, Any]] = [
        {
            "run_id": c.run_id,
            "status": c.status,
            "version": c.version,
            "resumes": v.resumes,
            "reason": v.reason,
        }
        for c, v in verdicts
    ]
    restarts = sum(1 for r in rows if not r["resumes"])
    if as_json:
        render.print_json(
            {"graph": action.name, "version": action.version, "runs": rows, "start_over": restarts}
        )
    else:
        table = Table()
        render.whole_column(table, "run", [r["run_id"] for r in rows])
        table.add_column("status")
        render.whole_column(table, "version", [r["version"] or "-" for r in rows])
        table.add_column("under this code")
        table.add_column("why")
        for r in rows:
            table.add_row(
                r["run_id"],
                r["status"],
                r["version"] or "-",
                "resumes" if r["resumes"] else "starts over",
                r["reason"],
            )
        render.out.print(table)
        render.out.print(
            f"{len(rows) - restarts} would resume, {restarts} would start over (version {action.version})"
        )
    if restarts:
        raise CommandFailed(f"{restarts} run(s) of graph {action.name!r} would start over under this code")


@app.command("versions")
def versions(
    ctx: typer.Context,
    graph: Annotated[str | None, typer.Argument(metavar="GRAPH", help="Only this graph.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List each version of a graph: its fingerprint or label, when it was first published, the
    live workers that serve it, its runs by status, what its runs do once no live worker serves it
    (pinned, or auto_upgrade) and its nodes."""
    client = client_of(ctx)
    names = [graph] if graph else [g.name for g in client.graphs()]
    listed = [_versions_of(client, name) for name in names]
    if as_json:
        render.print_json(listed)
        return
    columns = ("graph", "version", "label", "first published (UTC)", "live workers", "runs")
    table = Table(*columns, "on new version", "nodes")
    for entry in listed:
        for v in entry["versions"]:
            runs = ", ".join(f"{n} {s}" for s, n in sorted(v["runs"].items())) or "-"
            table.add_row(
                entry["graph"], v["version"], v["label"] or "-", render.when(v["first_published_at"]),
                ", ".join(v["workers"]) or "-", runs, _behaviour(v), ", ".join(v["nodes"]),
            )  # fmt: skip
    render.out.print(table)


def _behaviour(version: dict[str, Any]) -> str:
    """``pinned``, or ``auto_upgrade (hold)``: what its runs do once no live worker serves it."""
    if version["on_new_version"] != "auto_upgrade":
        return str(version["on_new_version"])
    return f"auto_upgrade (incompatible: {version['on_incompatible']})"


def _versions_of(client: Client, graph: str) -> dict[str, Any]:
    by_version: dict[str | None, Counter[str]] = {}
    for _, status, version in _runs(client, graph, tuple(Status)):
        by_version.setdefault(version, Counter())[status] += 1
    entries = [
        {
            **json.loads(e.model_dump_json()),
            "runs": dict(by_version.get(e.version, {})),
        }
        for e in client.versions(graph)
    ]
    return {"graph": graph, "versions": entries, "runs_not_started": dict(by_version.get(None, {}))}


ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume-compatible",
        help="Resume each run from its checkpoint when the new graph reads it (as check-checkpoints "
        "judges, with the graph REFLEXR_GRAPHS names here); else it starts over.",
    ),
]
RunningOpt = Annotated[
    bool,
    typer.Option(
        "--include-running",
        help="Move the version's live runs too: queued, retrying and waiting ones now, running "
        "ones once their attempt ends (never cut mid-step).",
    ),
]


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    graph: Annotated[str, typer.Argument(metavar="GRAPH", help="Name of a published graph.")],
    from_version: Annotated[
        str,
        typer.Option("--from", metavar="VERSION", help="The version whose held runs move (see `versions`)."),
    ],
    resume_compatible: ResumeOpt = False,
    include_running: RunningOpt = False,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Move the runs held for VERSION of GRAPH (waiting for a worker of it) to the newest version a
    live worker serves: from their first step, or with --resume-compatible from their checkpoint
    where the new graph reads it. Says first how many would resume and start over, and why."""
    client = client_of(ctx)
    plan = client.upgrade_plan(
        graph, from_version, resume_compatible=resume_compatible, include_running=include_running
    )
    if not as_json:
        _say_plan(plan, include_running)
    moving = len(plan.run_ids) + len(plan.running)
    confirm(f"move {moving} run(s) to version {plan.to_version}?", yes or not moving)
    done = client.upgrade(
        graph, from_version, resume_compatible=resume_compatible, include_running=include_running
    )
    if as_json:
        render.print_json(_plan_json(done))
        return
    render.out.print(
        f"moved {len(done.run_ids)} run(s) to version {done.to_version}: {len(done.resumed)} resumed "
        f"from their checkpoint, {len(done.restarted)} started over from their first step"
        + (f"; {len(done.running)} running run(s) move once their attempt ends" if include_running else "")
    )


def _say_plan(plan: UpgradePlan, include_running: bool) -> None:
    which = "held, queued, retrying or waiting" if include_running else "held"
    render.err.print(
        f"{len(plan.run_ids)} run(s) {which} for version {plan.from_version} would move to "
        f"{plan.to_version}: {len(plan.resumed)} would resume, {len(plan.restarted)} would start over",
        markup=False,
    )
    for resumes, reason, runs in plan.reasons():
        render.err.print(f"  {runs} would {'resume' if resumes else 'start over'}: {reason}", markup=False)
    if include_running:
        render.err.print(
            f"{len(plan.running)} running run(s) would move once their attempt ends, each judged then "
            f"by a worker of {plan.to_version}",
            markup=False,
        )


def _plan_json(plan: UpgradePlan) -> dict[str, Any]:
    reasons = [{"resumes": r, "reason": why, "runs": n} for r, why, n in plan.reasons()]
    return {
        **plan.model_dump(),
        "resumed": len(plan.resumed),
        "restarted": len(plan.restarted),
        "marked": len(plan.running),
        "reasons": reasons,
    }
