"""Event streams cannot starve the API: a real ``serve`` with 1,100 streams asked for at once holds
``REFLEXR_MAX_STREAMS`` of them on a Redis pool of their own, refuses the rest with 429 and
Retry-After, and answers every other route meanwhile; a stream's slot is free again as soon as
its client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from reflexr_graph.api.stream_slots import StreamSlots, share_of
from reflexr_graph.client import Client
from tests.surfaces.conftest import ApiServer, serving
from tests.waiting import wait_for

STREAM_PATHS = ("/api/runs/{run}/events", "/api/runs/{run}/stream")


class Streams:
    """Raw HTTP/1.1 connections that each ask for a run's live stream and stay open."""

    def __init__(self, server: ApiServer, run_id: str) -> None:
        self.host, port = server.url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self.token = server.token
        self.run_id = run_id
        self.open: list[asyncio.StreamWriter] = []

    async def ask(self, n: int) -> list[tuple[int, dict[str, str]]]:
        """Ask for ``n`` streams at once: each one's status and headers (kept open when 200)."""
        return list(await asyncio.gather(*(self._one(STREAM_PATHS[i % 2]) for i in range(n))))

    async def _one(self, path: str) -> tuple[int, dict[str, str]]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        request = (
            f"GET {path.format(run=self.run_id)} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n"
        )
        writer.write(request.encode())
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)).decode()
        status_line, *lines = head.strip().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        status = int(status_line.split()[1])
        if status == 200:
            self.open.append(writer)
        else:
            writer.close()
        return status, headers

    def close(self, n: int | None = None) -> None:
        for writer in self.open[:n]:
            writer.close()
        del self.open[:n]


@contextmanager
def streams_on(server: ApiServer, run_id: str) -> Iterator[tuple[Streams, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    streams = Streams(server, run_id)
    try:
        yield streams, loop
    finally:
        streams.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _other_routes_answer(server: ApiServer) -> None:
    with server.http() as http:
        for path in ("/readyz", "/api/runs", "/api/overview", "/api/graphs"):
            response = http.get(path)
            assert response.status_code == 200, (path, response.text)


def test_1100_streams_asked_at_once_leave_every_other_route_answering(
    own_api_server: ApiServer, client: Client
) -> None:
    """200 (the default cap) are held, the other 900 get 429 with Retry-After, and /readyz,
    /api/runs and the rest answer 200 while they are open."""
    run_id = client.enqueue("blocker", "streamed")  # no worker: it stays queued, its streams open
    with streams_on(own_api_server, run_id) as (streams, loop):
        answers = loop.run_until_complete(streams.ask(1100))
        statuses = [status for status, _ in answers]
        assert statuses.count(200) == 200 and statuses.count(429) == 900, sorted(set(statuses))
        assert {headers["retry-after"] for status, headers in answers if status == 429} == {"5"}
        assert {headers["content-type"] for status, headers in answers if status == 200} == {
            "text/event-stream; charset=utf-8"
        }
        _other_routes_answer(own_api_server)
        with own_api_server.http() as http:
            refused = http.get(f"/api/runs/{run_id}/stream")
            assert refused.status_code == 429 and "REFLEXR_MAX_STREAMS" in refused.json()["detail"]


def test_a_streams_slot_is_free_again_when_its_client_goes_away(env: dict[str, str], client: Client) -> None:
    with serving({**env, "REFLEXR_MAX_STREAMS": "3"}) as server:
        run_id = client.enqueue("blocker", "few")
        with streams_on(server, run_id) as (streams, loop):
            assert [s for s, _ in loop.run_until_complete(streams.ask(4))].count(429) == 1
            _other_routes_answer(server)
            streams.close(1)
            loop.run_until_complete(asyncio.sleep(0))
            wait_for(
                lambda: [s for s, _ in loop.run_until_complete(streams.ask(1))] == [200],
                what="the closed stream's slot to be free",
            )
            assert [s for s, _ in loop.run_until_complete(streams.ask(1))] == [429]


def test_one_tokens_share_of_the_streams() -> None:
    """One token may hold every stream; with more, each holds at most half, leaving room."""
    assert share_of(200, tokens=1) == 200 and share_of(200, tokens=3) == 100 and share_of(1, tokens=2) == 1
    slots = StreamSlots(cap=4, share=share_of(4, tokens=2))
    assert [slots.take("ops") for _ in range(3)] == [True, True, False]
    assert [slots.take("viewer") for _ in range(3)] == [True, True, False]
    slots.give_back("ops")
    assert slots.take("viewer") is False and slots.take("ops") is True and slots.open == 4
