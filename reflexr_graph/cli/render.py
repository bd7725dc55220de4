"""Output: rich tables for people, plain JSON for ``--json``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from reflexr_graph.core.words import plural
from reflexr_graph.model import (
    CHILD_WAIT_PREFIX,
    CHILDREN_WAIT_PREFIX,
    LIMIT_WAIT_PREFIX,
    VERSION_WAIT_PREFIX,
    RunEvent,
    RunInfo,
    Status,
    waits_on,
)
from reflexr_graph.schemas import GraphSchema

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

STATUS_STYLE = {
    Status.QUEUED: "cyan",
    Status.RUNNING: "blue",
    Status.RETRYING: "yellow",
    Status.SUCCEEDED: "green",
    Status.DEAD: "red",
    Status.CANCELLED: "magenta",
    Status.WAITING: "bright_cyan",
}


def print_json(value: Any) -> None:
    """One JSON document on stdout, without any markup."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


class _JsonItem(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def shown_as_json_or_none(found: Sequence[_JsonItem], as_json: bool, none: str) -> bool:
    """With --json, print ``found`` as a JSON array; on a terminal, say ``none`` when it is empty.
    True when that is all there is to show: the caller's table or lines are not wanted."""
    if as_json:
        print_json([item.to_json() for item in found])
        return True
    if not found:
        out.print(none)
        return True
    return False


def when(epoch_s: float) -> str:
    """An epoch time as UTC ISO text, or ``-`` for none."""
    if not epoch_s:
        return "-"
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: Status) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status.value}[/]"


def run_json(info: RunInfo) -> dict[str, Any]:
    return info.model_dump(mode="json")


def event_json(event: RunEvent) -> dict[str, Any]:
    return {"id": event.id, "type": event.type, "at": event.at, "fields": event.fields}


OUTPUT_LINES = 40
"""Lines of a run's output (or error) `status` shows before cutting it short; --full shows all."""
OUTPUT_CHARS = 4000
"""And characters: one long line of JSON is as unreadable as hundreds of short ones."""


@dataclass(frozen=True)
class Clipped:
    text: str
    hidden_lines: int
    hidden_chars: int

    @property
    def cut(self) -> bool:
        return bool(self.hidden_lines or self.hidden_chars)


def clip(text: str, max_lines: int = OUTPUT_LINES, max_chars: int = OUTPUT_CHARS) -> Clipped:
    """The start of ``text``, at most ``max_lines`` lines and ``max_chars`` characters."""
    lines = text.splitlines()
    kept = "\n".join(lines[:max_lines])
    hidden_lines = max(0, len(lines) - max_lines)
    hidden_chars = max(0, len(kept) - max_chars)
    if hidden_chars:
        kept = kept[:max_chars]
    return Clipped(kept, hidden_lines, hidden_chars)


def _value(value: Any) -> str:
    """A run's output as JSON, indented when it is a container (a table cell wraps one long line)."""
    return json.dumps(value, indent=2 if isinstance(value, dict | list) else None, default=str)


def attempt_cell(info: RunInfo) -> str:
    """``3 (1/3)``: the latest attempt's number, as history numbers it, and of all attempts so
    far, how many count toward max attempts (``RunInfo.attempt``, ``attempts``)."""
    return f"{info.attempt} ({info.attempts}/{info.max_attempts})"


def attempts_text(info: RunInfo) -> str:
    """``3 (1/3 counted toward max attempts; 2 ended waiting, not counted)``, with the replays."""
    uncounted = []
    if info.suspensions:
        uncounted.append(f"{info.suspensions} ended waiting")
    if info.interruptions:
        uncounted.append(f"{info.interruptions} interrupted by shutdowns or Redis")
    text = f"{info.attempt} ({info.attempts}/{info.max_attempts} counted toward max attempts"
    if uncounted:
        text += f"; {' and '.join(uncounted)}, not counted"
    text += ")"
    if info.replays:
        text += f"; replayed {info.replays}x (a replay starts a fresh attempt budget)"
    return text


def skipped_text(info: RunInfo) -> str:
    if not info.skipped_boundaries:
        return "0"
    return (
        f"{info.skipped_boundaries} (not checkpointed: a retry repeats the steps since the last saved "
        "boundary; `history` says which)"
    )


def last_failure_text(info: RunInfo) -> str:
    """The run's latest failed attempt, apart from what it does now: ``attempt 1 at <time>:
    step_failed, RuntimeError: ...``."""
    failure = info.last_failure
    if failure is None:
        return "-"
    said = f"attempt {failure.attempt} at {when(failure.time)}: {failure.reason}"
    return f"{said}, {failure.error}" if failure.error else said


def reused_text(info: RunInfo) -> str:
    return f"{plural(info.reused_steps, 'branch step')}, {plural(info.reused_calls, 'durable call')}"


def run_detail(
    info: RunInfo, extra: Iterable[tuple[str, str]] = (), *, full: bool = False, command: str = "status"
) -> None:
    """One run as a two-column table; a long output or error is cut short unless ``full``
    (``command`` is the one to run again with --full)."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows = [
        ("run", info.run_id),
        ("graph", info.graph),
        ("status", status_text(info.status)),
        ("attempt", attempts_text(info)),
        ("checkpoints", str(info.checkpoints)),
        ("skipped boundaries", skipped_text(info)),
        ("reused on retries", reused_text(info)),
        ("limit waits", limit_waits_text(info)),
        ("next node", info.next_node or "-"),
        ("reason", info.reason or "-"),
        ("error", info.error or "-"),
        ("last failure", last_failure_text(info)),
        ("created", when(info.created_at)),
        ("updated", when(info.updated_at)),
    ]
    if info.status is Status.WAITING:
        rows[3:3] = [("waiting for", waiting_text(info))]
    if info.upgrade_to:
        rows[3:3] = [("upgrade", upgrade_text(info))]
    if info.cancel_requested:
        rows[3:3] = [("cancel", "requested: its step in flight finishes, then it stops (--now: at once)")]
    if info.forked_from:
        rows.insert(2, ("forked from", f"{info.forked_from} at checkpoint #{info.forked_at_seq}"))
    if info.tags:
        rows.insert(2, ("tags", " ".join(f"{k}={v}" for k, v in info.tags.items())))
    if info.children:
        rows.insert(2, ("children", "\n".join(info.children)))
    if info.parent_run_id:
        rows.insert(2, ("parent", info.parent_run_id))
    if info.status is Status.SUCCEEDED:
        rows.append(("output", _value(info.output)))
    cut: list[str] = []
    for key, value in [*rows, *extra]:
        if key in ("output", "error", "last failure") and not full and (short := clip(value)).cut:
            value = short.text + "\n..."
            more = (
                f"{short.hidden_lines} more lines"
                if short.hidden_lines
                else f"{short.hidden_chars} more characters"
            )
            cut.append(f"{key} ({more})")
        table.add_row(key, value if key == "status" else plain(value))
    out.print(table)
    if cut:
        err.print(
            f"{' and '.join(cut)} cut short: `reflexr-graph {command} {info.run_id} --full` shows all "
            "(--json prints it whole)",
            markup=False,
        )


def limit_waits_text(info: RunInfo) -> str:
    """``3 waits, 1.2s in all`` (steps that waited in place for a limit), or ``-``."""
    if not info.limit_waits:
        return "-"
    return f"{info.limit_waits} wait{'s' if info.limit_waits != 1 else ''}, {info.limit_wait_s:.1f}s in all"


def upgrade_text(info: RunInfo) -> str:
    """What ``upgrade --include-running`` does with the run when its attempt ends."""
    how = (
        "resumes from its checkpoint if the new graph reads it, else starts over"
        if info.upgrade_resumes
        else "starts over from its first step"
    )
    return f"moves to version {info.upgrade_to} when its attempt ends; it {how}"


def waiting_text(info: RunInfo) -> str:
    """``signal 'approval' (until 2026-12-01 10:00:00 UTC)``, ``a timer until ...``."""
    until = f"until {when(info.wake_at)} UTC" if info.wake_at else "no timeout"
    if (key := waits_on(info.waiting_for, LIMIT_WAIT_PREFIX)) is not None:
        return f"limit {key!r} ({until})"
    if (version := waits_on(info.waiting_for, VERSION_WAIT_PREFIX)) is not None:
        return f"a worker of graph version {version!r} (none is live; start one, or upgrade the run)"
    if (child := waits_on(info.waiting_for, CHILD_WAIT_PREFIX)) is not None:
        return f"child run {child} to end (reflexr-graph status {child})"
    if (count := waits_on(info.waiting_for, CHILDREN_WAIT_PREFIX)) is not None:
        return f"{count} child runs to end (see children)"
    if info.waiting_for:
        return f"signal {info.waiting_for!r} ({until})"
    return f"a timer ({until})"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
"""What a terminal would act on rather than show: C0 and C1 control characters but the newline and
the tab (an escape sequence starts with one), and the invisible and direction-changing marks."""


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(value: str) -> str:
    """``value`` with every character a terminal would act on written as its escape (``\\x1b``):
    the one function every text of a user's, or read from the store, passes before a terminal."""
    return _CONTROL.sub(_escaped, value)


def plain(value: str) -> str:
    """``value`` printed as it is (its control characters escaped: :func:`terminal_safe`), not read
    as rich markup."""
    return terminal_safe(value).replace("[", r"\[")


def size(n_bytes: int) -> str:
    """``512 B``, ``1.2 kB``, ``3.4 MB``."""
    if n_bytes < 1000:
        return f"{n_bytes} B"
    if n_bytes < 1_000_000:
        return f"{n_bytes / 1000:.1f} kB"
    return f"{n_bytes / 1_000_000:.1f} MB"


def short_when(epoch_s: float) -> str:
    """An epoch time as ``MM-DD HH:MM`` UTC, for tables where the width is short."""
    if not epoch_s:
        return "-"
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%m-%d %H:%M")


_CELL_PAD = 3
"""Width a column adds besides its text: padding on both sides and a border."""


def _fitting(columns: list[tuple[str, list[str]]], required: int, width: int) -> list[int]:
    """Indexes of the columns to show: the first ``required`` always, then each that still fits."""
    need = [max(len(name), *(len(v) for v in values)) + _CELL_PAD for name, values in columns]
    chosen = list(range(required))
    used = sum(need[:required]) + 1
    for index in range(required, len(columns)):
        if used + need[index] <= width:
            chosen.append(index)
            used += need[index]
    return chosen


def _run_columns(runs: list[RunInfo], dead: bool) -> list[tuple[str, list[str]]]:
    """The columns of a list of runs, the ones kept first on a narrow terminal first. Dead letters
    have no status column (it would always say dead): their reason and attempts come first."""
    attempt = ("attempt", [attempt_cell(i) for i in runs])
    reason = ("reason", [i.reason or "-" for i in runs])
    graph = ("graph", [i.graph for i in runs])
    if dead:
        return [("run", [i.run_id for i in runs]), reason, attempt, graph, ("died", _updated(runs))]
    return [
        ("run", [i.run_id for i in runs]),
        ("status", [i.status.value for i in runs]),
        graph,
        ("updated", _updated(runs)),
        attempt,
        reason,
        ("next node", [i.next_node or "-" for i in runs]),
    ]


def _updated(runs: list[RunInfo]) -> list[str]:
    return [short_when(i.updated_at) for i in runs]


def whole_column(table: Table, name: str, values: Sequence[str]) -> None:
    """A column whose values are never cut nor wrapped (ids meant to be copied): it is as wide as
    its longest value, and the other columns give way."""
    table.add_column(name, no_wrap=True, min_width=max(len(name), *(len(v) for v in values)))


def run_table(runs: list[RunInfo], title: str, *, dead: bool = False) -> None:
    """Runs, one a row. Run ids never wrap, so they can be copied; on a narrow terminal the
    columns that do not fit are left out (``--json`` has every field)."""
    if not runs:
        out.print(f"no {title}")
        return
    columns = _run_columns(runs, dead)
    chosen = _fitting(columns, required=3, width=out.width)
    table = Table(title=title)
    for index in chosen:
        name = columns[index][0]
        if name in ("run", "attempt", "reason"):
            whole_column(table, name, columns[index][1])
        else:
            table.add_column(name, overflow="ellipsis" if name == "graph" else "fold")
    for row, info in enumerate(runs):
        cells = [
            status_text(info.status) if columns[i][0] == "status" else plain(columns[i][1][row])
            for i in chosen
        ]
        table.add_row(*cells)
    out.print(table)
    _left_out(columns, chosen)


def _left_out(columns: list[tuple[str, list[str]]], chosen: list[int]) -> None:
    if len(chosen) < len(columns):
        left_out = ", ".join(columns[i][0] for i in range(len(columns)) if i not in chosen)
        err.print(f"({left_out} left out to fit {out.width} columns; --json has every field)", markup=False)


def _input_names(entry: GraphSchema) -> str:
    """The inputs' field names, or the input type of a graph whose input is not an object."""
    return ", ".join(entry.inputs.get("properties", {})) or str(entry.inputs.get("type", "-"))


def graph_table(graphs: list[GraphSchema], serving: Mapping[str, list[str]]) -> None:
    """Published graphs, one a row, with the live workers that serve each."""
    if not graphs:
        out.print(
            "no graphs published yet: start a worker (reflexr-graph worker), or `reflexr-graph publish`"
        )
        return
    columns: list[tuple[str, list[str]]] = [
        ("graph", [entry.name for entry in graphs]),
        ("live workers", [", ".join(serving.get(entry.name, [])) for entry in graphs]),
        ("max attempts", [str(entry.max_attempts) for entry in graphs]),
        ("inputs", [_input_names(entry) for entry in graphs]),
        ("published", [when(entry.published_at) for entry in graphs]),
    ]
    # Names, times and each worker or input name stay whole; lists wrap between their items.
    whole = [(name, [w for v in values for w in v.split(", ")]) for name, values in columns]
    chosen = _fitting(whole, required=2, width=out.width)
    table = Table(title="graphs")
    for index in chosen:
        name, words = whole[index]
        table.add_column(name, min_width=max(len(name), *(len(w) for w in words)))
    for row in range(len(graphs)):
        cells = [plain(columns[i][1][row]) for i in chosen]
        if not columns[1][1][row]:
            cells[1] = "[red]none[/]"
        table.add_row(*cells)
    out.print(table)
    _left_out(columns, chosen)
    if any(not serving.get(entry.name) for entry in graphs):
        err.print(
            "a graph with no live worker takes runs, which wait up to REFLEXR_UNKNOWN_GRAPH_GRACE_S for one",
            markup=False,
        )


def runs(found: list[RunInfo], title: str, as_json: bool, *, dead: bool = False) -> None:
    """A list of runs: a table on a terminal (of dead letters: ``dead``), a JSON array with --json."""
    if as_json:
        print_json([run_json(i) for i in found])
    else:
        run_table(found, title, dead=dead)
