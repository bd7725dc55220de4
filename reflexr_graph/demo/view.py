"""What the demo shows: a live table of runs, and the closing summary with its legend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from reflexr_graph.demo.scenario import RunSpec
from reflexr_graph.model import RunInfo, Status

STEP_ORDER = ("plan", "classify", "assess", "page", "escalate", "file")
STYLE = {
    Status.QUEUED: "grey62",
    Status.RUNNING: "cyan",
    Status.RETRYING: "yellow",
    Status.SUCCEEDED: "green",
    Status.DEAD: "red",
    Status.CANCELLED: "magenta",
    Status.WAITING: "bright_cyan",
}


def _status(info: RunInfo) -> Text:
    return Text(info.status.value, style=STYLE[info.status])


def step_counts(executions: Mapping[str, int]) -> str:
    """``plan:1 classify:6 assess:1``, in the graph's order."""
    return " ".join(f"{k}:{executions[k]}" for k in STEP_ORDER if k in executions)


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


def _attempts(spec: RunSpec, info: RunInfo) -> str:
    if spec.attempts_before_replay:
        return f"{spec.attempts_before_replay} + {info.attempts} after replay"
    return str(info.attempts)


def summary(specs: list[RunSpec], infos: dict[str, RunInfo], executions: dict[str, dict[str, int]]) -> Table:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "status", "attempts", "checkpoints", "step executions", "notes"):
        table.add_column(column)
    for spec in specs:
        info = infos[spec.run_id]
        table.add_row(
            spec.label,
            _status(info),
            _attempts(spec, info),
            str(info.checkpoints),
            step_counts(executions.get(spec.run_id, {})),
            "; ".join(spec.notes),
        )
    return table
