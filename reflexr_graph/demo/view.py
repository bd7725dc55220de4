"""What the demo shows: a live table of runs, and the closing summary."""

from __future__ import annotations

from collections import Counter

from rich.console import Group
from rich.table import Table
from rich.text import Text

from reflexr_graph.demo.scenario import RunSpec
from reflexr_graph.model import RunInfo, Status

STEP_ORDER = ("plan", "classify", "assess", "escalate", "file")
STYLE = {
    Status.QUEUED: "grey62",
    Status.RUNNING: "cyan",
    Status.RETRYING: "yellow",
    Status.SUCCEEDED: "green",
    Status.DEAD: "red",
    Status.CANCELLED: "magenta",
}


def _status(info: RunInfo) -> Text:
    return Text(info.status.value, style=STYLE[info.status])


def live_view(
    phase: str, specs: list[RunSpec], infos: dict[str, RunInfo], executions: dict[str, int]
) -> Group:
    table = Table(expand=True, title=phase, title_justify="left")
    for column in ("run", "status", "attempts", "checkpoints", "next node", "step executions", "notes"):
        table.add_column(column)
    for spec in specs:
        info = infos[spec.run_id]
        table.add_row(
            spec.label,
            _status(info),
            f"{info.attempts}/{info.max_attempts}",
            str(info.checkpoints),
            info.next_node or "-",
            str(executions.get(spec.run_id, 0)),
            "; ".join(spec.notes),
        )
    counts = Counter(info.status.value for info in infos.values())
    line = "  ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
    return Group(table, Text(line, style="bold"))


def summary(specs: list[RunSpec], infos: dict[str, RunInfo], executions: dict[str, dict[str, int]]) -> Table:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "status", "attempts", "checkpoints", "step executions", "notes"):
        table.add_column(column)
    for spec in specs:
        info = infos[spec.run_id]
        done = executions.get(spec.run_id, {})
        steps = " ".join(f"{k}:{done[k]}" for k in STEP_ORDER if k in done)
        table.add_row(
            spec.label, _status(info), str(info.attempts), str(info.checkpoints), steps, "; ".join(spec.notes)
        )
    return table
