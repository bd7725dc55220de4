"""Save every checkpoint of a few graphs' runs, as this pydantic-graph release writes them.

``tests/core/test_cross_version.py`` resumes each under the installed release, so a checkpoint
written by one release's task order and node-run ids is shown to resume under another's, or to
be discarded with a reason. Regenerate the file of another release with that release installed::

    .tools/bin/uv venv /tmp/pg && VIRTUAL_ENV=/tmp/pg .tools/bin/uv pip install -e '.[dev,ai]' \\
        'pydantic-graph==2.68.0' 'pydantic-ai-slim==2.68.0'
    /tmp/pg/bin/python -m tests.core.refs.save_checkpoints

It writes ``tests/core/refs/checkpoints-pg<version>.json``: per case, the run's inputs, output,
and each checkpoint's seq, next node and payload.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from reflexr_graph import clock
from reflexr_graph.store.redis_store import RedisStore
from tests.core.graphs import reset
from tests.core.harness import Harness
from tests.core.refs.cases import CASES
from tests.redis_server import RedisServer

HERE = Path(__file__).parent


def saved_file(version: str) -> Path:
    return HERE / f"checkpoints-pg{version}.json"


def save_all(store: RedisStore, harness: Harness) -> dict[str, Any]:
    """Each case run once to the end, with every checkpoint it saved on the way."""
    cases: dict[str, Any] = {}
    for name, (make, inputs) in CASES.items():
        reset()
        action = make()
        run_id = harness.create(action, inputs)
        output = harness.attempt(action, run_id, inputs=inputs)
        saved = [
            {
                "seq": info.seq,
                "next_node": info.next_node,
                "payload": store.read_checkpoint(run_id, info.seq).payload,
            }
            for info in store.checkpoints(run_id)
        ]
        cases[name] = {"inputs": inputs, "output": output, "checkpoints": saved}
    return cases


def main() -> None:
    version = metadata.version("pydantic-graph")
    server = RedisServer()
    server.start()
    now = [clock.now()]
    previous = clock.set_source(lambda: now[0])
    try:
        store = RedisStore.from_url(server.url)
        doc = {"pydantic_graph": version, "cases": save_all(store, Harness(store, now))}
        store.close()
    finally:
        clock.set_source(previous)
        server.close()
    saved_file(version).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {saved_file(version)}")


if __name__ == "__main__":
    main()
