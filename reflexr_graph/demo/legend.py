"""The legend under the demo's summary: what its columns count, with this run's own numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text

from reflexr_graph.demo.scenario import RunSpec
from reflexr_graph.model import RunInfo


def _attempts(specs: Sequence[RunSpec]) -> str:
    text = (
        "Attempts that count toward max_attempts: each failed one, and one SIGKILLed with its worker. "
        "An attempt a worker's soft shutdown (a deploy) hands back does not count, nor one that ends "
        "because its run waits for a signal (on-call's first)."
    )
    replayed = [s for s in specs if s.attempts_before_replay]
    for spec in replayed:
        text += (
            f" A dlq replay starts a fresh budget of attempts, so {spec.label} shows the "
            f"{spec.attempts_before_replay} it used before its replay + those after it."
        )
    return text


def _checkpoints(example: RunSpec, saved_before: Sequence[str]) -> str:
    nodes = [n for n in saved_before if n]
    output = " and its output at the end" if "" in saved_before else ""
    return (
        f"Saves of the run's progress in Redis, one round trip each: {example.label} saved "
        f"{len(saved_before)}, before {', '.join(nodes)}{output}. map is the fork that starts one "
        "classify per document; decide picks escalate (urgent) or file (routine). A retry resumes "
        "from the latest checkpoint, so only the step in flight runs again."
    )


def _executions(
    specs: Sequence[RunSpec], infos: Mapping[str, RunInfo], done: Mapping[str, Mapping[str, int]]
) -> str:
    sizes = sorted(s.documents for s in specs)
    text = (
        "How many times each step's code ran, over every attempt and worker (the triage example "
        "counts them in Redis). classify is a map step: it runs once per document, and these runs "
        f"have {sizes[0]} to {sizes[-1]} documents. A branch that finished is recorded and not run again "
        "on a retry; page is a durable call inside escalate, made once however often the step runs. "
        "The poison run's classify fails for every document on every attempt"
    )
    for spec in (s for s in specs if s.attempts_before_replay):
        attempts = spec.attempts_before_replay + infos[spec.run_id].attempts
        classify = done.get(spec.run_id, {}).get("classify", 0)
        text += f": {spec.label}'s " + _classify_count(classify, spec.documents, attempts)
    return text + "."


def _classify_count(classify: int, documents: int, attempts: int) -> str:
    # How often a failing map step's branches ran depends on timing, so the count is explained
    # whichever way it fell, not only when it is exactly documents × attempts.
    expected = documents * attempts
    if classify == expected:
        return f"classify:{classify} is {documents} documents × {attempts} attempts"
    why = (
        "an attempt cut short by the crash ran some documents too"
        if classify > expected
        else "a document's failure can end its attempt before the others run"
    )
    return f"classify:{classify}, where {documents} documents × {attempts} attempts make {expected}: {why}"


def legend(
    specs: Sequence[RunSpec],
    infos: Mapping[str, RunInfo],
    done: Mapping[str, Mapping[str, int]],
    saved_before: Sequence[str],
) -> Table:
    """Three rows, one per counting column. ``saved_before``: the first run's checkpoints, by next node
    ("" for the output checkpoint)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("attempts", Text(_attempts(specs)))
    grid.add_row("checkpoints", Text(_checkpoints(specs[0], saved_before)))
    grid.add_row("step executions", Text(_executions(specs, infos, done)))
    return grid
