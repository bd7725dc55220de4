"""Streaming with real workers: emit() in a step, Client.stream and AsyncClient.stream reading live,
a worker SIGKILLed mid-stream, a step that fails mid-stream, and REFLEXR_STREAM_MAX_ITEMS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.model import Status, StreamItem
from tests.fleet import stream_graphs
from tests.fleet.conftest import Fleet, executions
from tests.waiting import wait_for

GRAPHS = {"REFLEXR_GRAPHS": stream_graphs.REFS}


def texts(items: list[StreamItem]) -> list[str]:
    return [i.value for i in items if i.topic == "output"]


def test_a_reader_gets_the_first_token_while_the_run_runs_and_then_all_in_order(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("tokens", {"n": 50, "gap_s": 0.01})
    seen: list[StreamItem] = []
    for item in client.stream(run_id, timeout=60):
        if item.topic == "output" and not seen:
            assert client.get(run_id).status is Status.RUNNING, "the first token came while the run ran"
        seen.append(item)
    assert client.get(run_id).status is Status.SUCCEEDED
    assert texts(seen) == [f"t{i} " for i in range(50)]
    assert [i.offset for i in seen] == list(range(1, 52))
    assert seen[0].topic == "status" and seen[0].node == "intro" and seen[0].value == {"phase": "intro"}
    assert {(i.node, i.attempt, i.restart) for i in seen[1:]} == {("speak", 1, False)}
    # Read again after an offset, and by topic: the stream is kept with the run.
    assert texts(list(client.stream(run_id, after=49))) == ["t48 ", "t49 "]
    assert [i.value for i in client.stream(run_id, topic="status")] == [{"phase": "intro"}]


def test_100_async_readers_on_one_loop(fleet: Fleet, client_for: Callable[[Fleet], Client]) -> None:
    fleet.start(**GRAPHS)
    run_id = client_for(fleet).enqueue("tokens", {"n": 20, "gap_s": 0.02})

    async def main() -> list[list[str]]:
        async with AsyncClient(fleet.settings()) as client:

            async def read() -> list[str]:
                return [i.value async for i in client.stream(run_id, topic="output", timeout=60)]

            return await asyncio.gather(*(read() for _ in range(100)))

    results = asyncio.run(main())
    assert all(r == [f"t{i} " for i in range(20)] for r in results)


@pytest.mark.slow
def test_a_worker_killed_mid_stream_restarts_the_node_and_the_finished_step_emits_once(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    worker = fleet.start(**GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("tokens", {"n": 10, "pause_at": 4})
    wait_for(lambda: "speak-paused:1" in executions(redis_client, run_id), 30, "speak to pause mid-stream")
    worker.kill_group()  # SIGKILL of the worker and its pool child, by pid
    fleet.start(**GRAPHS)
    items = list(client.stream(run_id, timeout=60))
    assert client.get(run_id).status is Status.SUCCEEDED
    assert [i.value for i in items if i.topic == "status"] == [{"phase": "intro"}], "intro emitted once"
    restarts = [i for i in items if i.restart]
    assert len(restarts) == 1
    marker = restarts[0]
    assert (marker.node, marker.attempt, marker.topic) == ("speak", 2, "")
    assert marker.value == {"void_from": 2}, "the first item speak emitted in attempt 1"
    at = items.index(marker)
    assert texts(items[:at]) == [f"t{i} " for i in range(4)]
    assert texts(items[at + 1 :]) == [f"t{i} " for i in range(10)]
    assert {i.attempt for i in items[at + 1 :]} == {2}


def test_a_step_that_fails_mid_stream_restarts_its_node(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("tokens", {"n": 6, "fail_at": 3})
    items = list(client.stream(run_id, timeout=60))
    assert client.get(run_id).status is Status.SUCCEEDED
    marker = next(i for i in items if i.restart)
    at = items.index(marker)
    assert texts(items[:at]) == ["t0 ", "t1 ", "t2 "]
    assert texts(items[at + 1 :]) == [f"t{i} " for i in range(6)]
    voided = [i for i in items[:at] if i.node == marker.node and i.offset >= marker.value["void_from"]]
    assert texts(voided) == ["t0 ", "t1 ", "t2 "]


def test_past_stream_max_items_the_run_dies_with_an_error_naming_the_setting(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    fleet.start(REFLEXR_STREAM_MAX_ITEMS="100", **GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("flood", 150)
    items = list(client.stream(run_id, timeout=60))
    info = client.get(run_id)
    assert info.status is Status.DEAD and info.reason == "stream_full"
    assert info.error is not None and "REFLEXR_STREAM_MAX_ITEMS=100" in info.error
    assert [i.value for i in items] == list(range(100))


def test_with_payload_keys_emitted_values_are_encrypted_in_redis_and_read_back_plain(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """G10 covers the stream too: each item's value passes the payload codec like every payload."""
    from tests.fleet.test_payloads import KEY_SPEC
    from tests.store.test_payloads import every_value

    fleet.env["REFLEXR_PAYLOAD_KEYS"] = KEY_SPEC
    fleet.start(**GRAPHS)
    client = client_for(fleet)
    run_id = client.enqueue("tokens", {"n": 5, "gap_s": 0})
    assert texts(list(client.stream(run_id, timeout=60))) == [f"t{i} " for i in range(5)]
    held = every_value(redis_client)
    assert b"t3 " not in held and b'"phase"' not in held, "no emitted value is readable in Redis"
