"""Tags: given at enqueue (Client, AsyncClient, CLI, API), kept with the run, indexed, filtered on."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.core.tags import MAX_TAGS
from reflexr_graph.errors import InvalidInputs
from reflexr_graph.store import keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.redis_store import RedisStore
from tests.redis_server import RedisFactory
from tests.surfaces.conftest import ApiServer, Cli

JOB = {"key": "a", "n": 1}


def test_tags_are_kept_with_the_run_and_listings_filter_by_them(client: Client) -> None:
    acme = client.enqueue("counter", JOB, tags={"tenant": "acme", "tier": "gold"})
    other = client.enqueue("counter", JOB, tags={"tenant": "globex", "tier": "gold"})
    plain = client.enqueue("counter", JOB)
    assert client.get(acme).tags == {"tenant": "acme", "tier": "gold"}
    assert client.get(plain).tags == {}
    assert [r.run_id for r in client.runs(tags={"tenant": "acme"})] == [acme]
    assert [r.run_id for r in client.runs(tags={"tier": "gold"})] == [other, acme]
    assert [r.run_id for r in client.runs(tags={"tier": "gold", "tenant": "globex"})] == [other]
    assert client.runs(tags={"tenant": "acme"}, status="succeeded") == []
    assert [r.run_id for r in client.runs_page(tags={"tenant": "acme"}).runs] == [acme]


def test_a_run_without_tags_writes_no_tag_field_or_index(client: Client, redis_client: redis.Redis) -> None:
    run_id = client.enqueue("counter", JOB)
    assert not redis_client.hexists(keys.run(run_id), "tags")
    assert redis_client.keys("rg:{s0}:#tag:*") == []
    assert not redis_client.exists(keys.tag_indexes(0))


def test_a_tagged_run_is_indexed_by_each_tag(client: Client, redis_client: redis.Redis) -> None:
    run_id = client.enqueue("counter", JOB, tags={"tenant": "acme", "tier": "gold"})
    for key, value in (("tenant", "acme"), ("tier", "gold")):
        assert redis_client.zrange(keys.tag_index(key, value, 0), 0, -1) == [run_id.encode()]
    assert redis_client.type(keys.stream(run_id)) == b"none", "the run's stream is no tag index"


def test_a_tag_listing_drops_the_entries_of_runs_that_expired(
    client: Client, redis_client: redis.Redis
) -> None:
    gone = client.enqueue("counter", JOB, tags={"tenant": "acme"})
    kept = client.enqueue("counter", JOB, tags={"tenant": "acme"})
    redis_client.delete(*keys.run_keys(gone))  # as retention expires a run's keys
    assert [r.run_id for r in client.runs(tags={"tenant": "acme"})] == [kept]
    assert redis_client.zrange(keys.tag_index("tenant", "acme", 0), 0, -1) == [kept.encode()]


def test_a_tag_index_goes_with_the_runs_it_holds(client: Client, redis_url: str) -> None:
    """The reaper's prune drops the entries of expired runs from every tag index, listed or not,
    and an index goes (with its name in the shard's set) once its last run has."""
    gone = [client.enqueue("counter", JOB, tags={"tenant": "acme", "tier": "gold"}) for _ in range(3)]
    kept = client.enqueue("counter", JOB, tags={"tier": "gold"})
    store = RedisStore.from_url(redis_url)
    r = store.client
    try:
        for run_id in gone:
            r.delete(*keys.run_keys(run_id))  # as retention expires a run's keys
        cursors: dict[int, int] = {}
        assert store.prune_tag_indexes(cursors) == 6
        assert not r.exists(keys.tag_index("tenant", "acme", 0))
        assert r.zrange(keys.tag_index("tier", "gold", 0), 0, -1) == [kept.encode()]
        assert r.smembers(keys.tag_indexes(0)) == {keys.tag_index("tier", "gold", 0).encode()}
        assert cursors == {0: 0}  # walked through the set: the next call starts again
        r.delete(*keys.run_keys(kept))
        assert store.prune_tag_indexes(cursors) == 1
        assert r.keys("rg:{s0}:#tag*") == [] and not r.exists(keys.tag_indexes(0))
    finally:
        store.close()


@pytest.mark.parametrize(
    ("tags", "where"),
    [
        ({"": "x"}, ["tags", 0]),
        ({"bad key": "x"}, ["tags", 0]),
        ({"k": "has space"}, ["tags", "k"]),
        ({"k": "a=b"}, ["tags", "k"]),
        ({"k": ""}, ["tags", "k"]),
        ({"k": "v" * 129}, ["tags", "k"]),
        ({"k" * 64: "v"}, ["tags", 0]),
        ({"k": 3}, ["tags", "k"]),
        ({f"k{i}": "v" for i in range(MAX_TAGS + 1)}, ["tags"]),
    ],
)
def test_invalid_tags_are_refused_before_anything_is_written_and_never_echoed(
    client: Client, redis_client: redis.Redis, tags: dict[str, object], where: list[object]
) -> None:
    with pytest.raises(InvalidInputs) as caught:
        client.enqueue("counter", JOB, tags=tags)  # type: ignore[arg-type]
    assert caught.value.errors[0]["loc"] == where
    for value in tags.values():
        if isinstance(value, str) and len(value) > 1:
            assert value not in str(caught.value)
    assert redis_client.zcard(keys.all_runs(0)) == 0


def test_the_async_client_enqueues_and_lists_by_tag(client: Client, redis_url: str, queue: str) -> None:
    async def main() -> tuple[str, list[str]]:
        async with AsyncClient.from_url(redis_url, queue=queue) as aclient:
            run_id = await aclient.enqueue("counter", JOB, tags={"tenant": "acme"})
            found = await aclient.runs(tags={"tenant": "acme"})
            return run_id, [r.run_id for r in found]

    run_id, found = asyncio.run(main())
    assert found == [run_id]
    assert client.get(run_id).tags == {"tenant": "acme"}


def test_the_cli_takes_tags_shows_them_and_filters_by_them(client: Client, cli: Cli) -> None:
    done = cli("enqueue", "counter", "--input", json.dumps(JOB), "--tag", "tenant=acme", "-t", "tier=gold")
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    client.enqueue("counter", JOB, tags={"tenant": "globex"})
    shown = cli("status", run_id)
    assert "tenant=acme tier=gold" in shown.stdout
    listed = cli("runs", "--tag", "tenant=acme", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id]
    assert json.loads(listed.stdout)[0]["tags"] == {"tenant": "acme", "tier": "gold"}
    bad = cli("runs", "--tag", "tenant")
    assert bad.returncode == 2 and "--tag: a tag is written key=value" in bad.stderr
    twice = cli("runs", "--tag", "a=1", "--tag", "a=2")
    assert twice.returncode == 2 and "once" in twice.stderr


def test_the_api_takes_tags_and_filters_by_them(api_server: ApiServer) -> None:
    with api_server.http() as http:
        made = http.post("/api/runs", json={"graph": "counter", "inputs": JOB, "tags": {"tenant": "acme"}})
        assert made.status_code == 201, made.text
        assert made.json()["tags"] == {"tenant": "acme"}
        http.post("/api/runs", json={"graph": "counter", "inputs": JOB, "tags": {"tenant": "globex"}})
        page = http.get("/api/runs", params={"tag": "tenant=acme"}).json()
        assert [r["run_id"] for r in page["runs"]] == [made.json()["run_id"]]
        bad = http.post("/api/runs", json={"graph": "counter", "inputs": JOB, "tags": {"k": "a b"}})
        assert bad.status_code == 422
        assert http.get("/api/runs", params={"tag": "nope"}).status_code == 422
        assert http.get("/api/dead-letters", params={"tag": "tenant=acme"}).json()["runs"] == []


def test_tags_cost_one_zadd_and_one_sadd_each_inside_the_create_script(private_redis: RedisFactory) -> None:
    server = private_redis()
    store = RedisStore.from_url(server.url)
    r = redis.Redis.from_url(server.url)
    try:
        store.preload_scripts()
        costs = []
        for n, tags in enumerate([{}, {}, {"tenant": "acme", "tier": "gold"}]):
            r.config_resetstat()
            run = NewRun(f"r{n}", "g", "0", None, None, 3, 60_000, tags=tags)
            store.do(new_run(run))
            stats = r.info("commandstats")
            costs.append({k: int(v["calls"]) for k, v in stats.items() if not k.startswith("cmdstat_config")})
        untagged, tagged = costs[1], costs[2]
        assert tagged["cmdstat_evalsha"] == untagged["cmdstat_evalsha"] == 1  # one round trip either way
        assert tagged["cmdstat_zadd"] - untagged["cmdstat_zadd"] == 2  # one index entry per tag
        assert tagged["cmdstat_sadd"] == 2  # and its name in the shard's set, for the prune
        assert sum(tagged.values()) - sum(untagged.values()) == 4
    finally:
        r.close()
        store.close()


def test_a_step_reads_its_runs_tags_from_current_run(redis_url: str) -> None:
    """The claim hands the run's tags to the attempt in its one reply: ``current_run().tags``."""
    from pydantic_graph import GraphBuilder, StepContext

    from reflexr_graph import GraphAction, current_run
    from reflexr_graph.fleet import attempt
    from tests.fleet.inproc import claim, fleet_app

    g = GraphBuilder(name="tagged", input_type=int, output_type=dict[str, str])

    @g.step
    async def read(ctx: StepContext[None, None, int]) -> dict[str, str]:
        return dict(current_run().tags)

    g.add(g.edge_from(g.start_node).to(read), g.edge_from(read).to(g.end_node))
    app = fleet_app(redis_url, GraphAction(g.build()))
    store = app.store()
    try:
        tags = {"tenant": "acme", "tier": "gold"}
        for run_id, given in (("tagged-1", tags), ("plain-1", {})):
            store.do(new_run(NewRun(run_id, "tagged", "1", None, None, 3, 60_000, tags=given)))
            attempt.run_claimed(app, store, claim(app, store, run_id))
            assert store.get(run_id).output == given
    finally:
        store.close()
        app.close()
