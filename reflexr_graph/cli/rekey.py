"""``reflexr-graph rekey``: encrypt every stored payload again under the first of REFLEXR_PAYLOAD_KEYS."""

from __future__ import annotations

import typer

from reflexr_graph.cli import render
from reflexr_graph.cli.app import GraphOpt, JsonOpt, YesOpt, app, client_of, confirm
from reflexr_graph.cli.failures import BadInput, CommandFailed
from reflexr_graph.store.rekey import rekey as rekey_runs


@app.command()
def rekey(ctx: typer.Context, graph: GraphOpt = None, yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Encrypt every run's stored payloads again under the first key of REFLEXR_PAYLOAD_KEYS, so an
    older key can be dropped. Safe beside a live fleet, to interrupt and to run again."""
    store = client_of(ctx).store
    ring = store.codec.ring
    if ring is None:
        raise BadInput("REFLEXR_PAYLOAD_KEYS is not set: rekey encrypts under its first key; set it")
    which = f"the runs of {graph}" if graph else "every run"
    confirm(f"rewrite the payloads of {which} under key {ring.primary}?", yes)
    report = rekey_runs(store, graph=graph)
    if as_json:
        render.print_json({
            "key": report.key_id, "runs": report.runs, "rewritten": report.rewritten,
            "unreadable": report.unreadable,
        })  # fmt: skip
    else:
        render.out.print(
            f"{report.rewritten} payload(s) of {report.runs} run(s) rewritten under key {report.key_id}"
        )
    if report.unreadable:
        runs = ", ".join(sorted(report.unreadable))
        raise CommandFailed(
            f"{len(report.unreadable)} run(s) hold payloads this process cannot read ({runs}); "
            "add their key to REFLEXR_PAYLOAD_KEYS (see `reflexr-graph status RUN`), then run rekey again"
        )
