"""``publish``: write graphs' schemas from a deploy step, before any worker has started.

A producer deployed before the workers would otherwise have every enqueue refused
("no graph named ... is published"): clients validate inputs against the schemas workers
publish, and no worker has run yet. A deploy step that can import the graphs' code runs
``reflexr-graph publish myapp.graphs:summarize`` instead; workers overwrite the entry when
they start, and only if the graph changed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, app, client_of
from reflexr_graph.graph_registry import build_registry


@app.command()
def publish(
    ctx: typer.Context,
    refs: Annotated[
        list[str],
        typer.Argument(
            metavar="MODULE:ATTR...",
            help="GraphActions (or graphs), as in REFLEXR_GRAPHS.",
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Publish the schemas of graphs a producer will enqueue, without starting a worker."""
    registry = build_registry(refs)
    client = client_of(ctx)
    written = set(client.publish(registry.values()))
    serving = client.serving(sorted(registry))
    if as_json:
        render.print_json(
            [
                {
                    "graph": n,
                    "fingerprint": a.fingerprint,
                    "written": n in written,
                    "workers": serving.get(n, []),
                }
                for n, a in sorted(registry.items())
            ]
        )
        return
    for name, action in sorted(registry.items()):
        state = "published" if name in written else "already published, unchanged"
        workers = serving.get(name, [])
        live = f"{len(workers)} live worker(s)" if workers else "no live worker serves it yet"
        render.out.print(f"{name}: {state} (fingerprint {action.fingerprint[:16]}); {live}", markup=False)
