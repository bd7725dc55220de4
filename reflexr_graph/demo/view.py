"""What the demo shows: a live table of runs, and the closing summary with its legend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

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


def _runs_table(
    table: Table,
    middle: tuple[str, ...],
    specs: list[RunSpec],
    infos: dict[str, RunInfo],
    cells: Callable[[RunSpec, RunInfo], tuple[str, ...]],
) -> Table:
    """A row a run: its label and status, the ``middle`` columns (``cells``), then its notes."""
    for column in ("run", "status", *middle, "notes"):
        table.add_column(column)
    for spec in specs:
        info = infos[spec.run_id]
        table.add_row(spec.label, _status(info), *cells(spec, info), "; ".join(spec.notes))
    return table


def live_view(
    phase: str, specs: list[RunSpec], infos: dict[str, RunInfo], executions: dict[str, int]
) -> Group:
    def cells(spec: RunSpec, info: RunInfo) -> tuple[str, ...]:
        return (
            f"{info.attempts}/{info.max_attempts}",
            str(info.checkpoints),
            info.next_node or "-",
            str(executions.get(spec.run_id, 0)),
        )

    middle = ("attempts", "checkpoints", "next node", "step executions")
    table = _runs_table(Table(expand=True, title=phase, title_justify="left"), middle, specs, infos, cells)
    counts = Counter(info.status.value for info in infos.values())
    line = "  ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
    return Group(table, Text(line, style="bold"))


def _attempts(spec: RunSpec, info: RunInfo) -> str:
    if spec.attempts_before_replay:
        return f"{spec.attempts_before_replay} + {info.attempts} after replay"
    return str(info.attempts)


def summary(specs: list[RunSpec], infos: dict[str, RunInfo], executions: dict[str, dict[str, int]]) -> Table:
    def cells(spec: RunSpec, info: RunInfo) -> tuple[str, ...]:
        return (_attempts(spec, info), str(info.checkpoints), step_counts(executions.get(spec.run_id, {})))

    middle = ("attempts", "checkpoints", "step executions")
    return _runs_table(Table(title="summary", title_justify="left"), middle, specs, infos, cells)
