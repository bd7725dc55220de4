"""Stored text never drives the terminal: a graph name with escape sequences, a bidi override and
the event codec's separator, stored by an older release or another producer, is shown escaped by
``runs``, ``status`` and ``history`` (cli/render.py: terminal_safe), and shifts no event field."""

from __future__ import annotations

from reflexr_graph.client import Client
from reflexr_graph.store import RedisStore
from tests.surfaces.conftest import Cli

HOSTILE = "evil\x1b[2J\x1b]0;owned\x07\u202ename\x1fgraph"


def test_runs_status_and_history_escape_what_a_terminal_would_act_on(
    cli: Cli, client: Client, redis_url: str
) -> None:
    store = RedisStore.from_url(redis_url)
    try:
        run_id, _ = store.create_run(
            "run-hostile", graph=HOSTILE, inputs_json="{}", max_attempts=1, dispatch_grace_ms=60_000
        )
    finally:
        store.close()
    # The separator in the graph name is kept in its field, written as U+241F: no field shifts.
    (enqueued,) = client.history(run_id)
    assert enqueued.fields == {"graph": HOSTILE.replace("\x1f", "\u241f")}
    for argv in (["runs"], ["status", run_id], ["history", run_id], ["dlq", "list"]):
        done = cli(*argv)
        assert done.returncode == 0, done.stderr
        for raw in ("\x1b", "\x07", "\u202e", "\x1f"):
            assert raw not in done.stdout + done.stderr, (argv, done.stdout)
        if argv[0] != "dlq":
            assert "\\x1b" in done.stdout and "\\u202e" in done.stdout, (argv, done.stdout)
