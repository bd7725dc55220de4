"""A succeeded run's finished checkpoint is kept as its entry alone (succeed.lua): its JSON is the
run's output in an envelope the run hash tells, so every reader rebuilds it, byte for byte, from
the run hash (``records.finished_checkpoint``). Where it is not exactly that (a cancel asked while
the last step ran, a version label that is not the fingerprint, a payload codec), the payload is
written as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction
from reflexr_graph.core.port import AttemptContext, Boundary
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.records import checkpoint_field
from reflexr_graph.store.rekey import rekey
from reflexr_graph.store.settings import StoreOptions
from tests.store.support import make_run, new_token
from tests.store.test_payloads import spec

OUTPUT = '{"total":3,"note":"caf\\u00e9 \\"done\\""}'


class Tally(BaseModel):
    count: int = 0


def _action() -> GraphAction:
    g = GraphBuilder(name="demo", state_type=Tally, input_type=int, output_type=int, auto_instrument=False)

    @g.step(node_id="s1")
    async def s1(ctx: StepContext[Tally, None, int]) -> int:
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(s1), g.edge_from(s1).to(g.end_node))
    return GraphAction(g.build())


ACTION = _action()
FINISHED = ACTION.checkpoints.encode(seq=3, output=OUTPUT, finished=True)
"""What an attempt of the graph hands succeed.lua (core/checkpoint.py), seq 3 after two saves."""


def _claim(store: RedisStore, run_id: str, version: str) -> AttemptContext:
    claim = store.claim(run_id, new_token(), lease_ttl_ms=60_000, version=version)
    assert claim.claimed, claim
    return claim.context()


def _finish(
    store: RedisStore, run_id: str, *, version: str = ACTION.fingerprint, cancel: bool = False
) -> bool:
    make_run(store, run_id)
    ctx = _claim(store, run_id, version)
    for seq in (1, 2):
        store.save_checkpoint(ctx, Boundary(f'{{"at":{seq}}}', seq=seq, next_node="s1"))
    if cancel:
        store.cancel(run_id)  # asked while the last step runs: the attempt finishes it
    return store.succeed(ctx, OUTPUT, checkpoint=FINISHED, seq=3)


def _read_by_each_reader(store: RedisStore, run_id: str) -> set[str | None]:
    stored = store.stored_checkpoints([(run_id, "succeeded", None)])
    return {
        store.load_checkpoint(run_id),
        store.read_checkpoint(run_id, 3).payload,
        stored[0].checkpoint,
    }


def test_a_succeeded_run_keeps_its_finished_checkpoint_as_its_entry_and_every_reader_rebuilds_it(
    store: RedisStore, raw: redis.Redis
) -> None:
    assert FINISHED.endswith(f',"output":{OUTPUT}}}') and ACTION.version == ACTION.fingerprint
    assert _finish(store, "run-1")
    assert store.get("run-1").status is Status.SUCCEEDED
    assert not raw.hexists(keys.ckpt("run-1"), "3"), "no finished payload: it would repeat the output"
    assert sorted(raw.hkeys(keys.ckpt("run-1"))) == [b"1", b"2"]
    assert _read_by_each_reader(store, "run-1") == {FINISHED}
    listed = store.checkpoints("run-1")
    assert [(c.seq, c.finished, c.size, c.attempt) for c in listed] == [
        (1, False, 8, 1), (2, False, 8, 1), (3, True, len(FINISHED), 1)
    ]  # fmt: skip
    assert store.checkpoint_info("run-1") == {
        "seq": 3, "saved_at": listed[2].saved_at, "size": len(FINISHED), "next_node": None
    }  # fmt: skip


def test_where_the_output_is_not_kept_or_not_all_it_holds_the_payload_is_written_as_before(
    store: RedisStore, raw: redis.Redis
) -> None:
    # A cancel asked while the last step ran records no output: a replay records it from this.
    assert not _finish(store, "run-cancel", cancel=True)
    assert store.get("run-cancel").status is Status.CANCELLED
    assert raw.hget(keys.ckpt("run-cancel"), "3") == FINISHED.encode()
    # A version label is not the fingerprint the checkpoint holds: it is not told by the run hash.
    assert _finish(store, "run-label", version="v2")
    assert raw.hget(keys.ckpt("run-label"), "3") == FINISHED.encode()
    for run_id in ("run-cancel", "run-label"):
        assert not raw.hget(keys.run(run_id), checkpoint_field(3)).startswith(b"o")  # type: ignore[union-attr]
        assert _read_by_each_reader(store, run_id) == {FINISHED}


@pytest.fixture
def sealed(redis_url: str) -> Iterator[RedisStore]:
    s = RedisStore.from_url(redis_url, options=StoreOptions(codec=PayloadCodec(KeyRing.parse(spec("k1")))))
    try:
        yield s
    finally:
        s.close()


def test_an_encrypted_output_is_decoded_before_the_checkpoint_is_rebuilt(
    store: RedisStore, sealed: RedisStore, raw: redis.Redis
) -> None:
    assert _finish(store, "run-1")
    rekey(sealed)  # the output is sealed under k1 now; the checkpoint has no payload to seal
    assert raw.hget(keys.run("run-1"), "output") != OUTPUT.encode()
    assert not raw.hexists(keys.ckpt("run-1"), "3")
    assert _read_by_each_reader(sealed, "run-1") == {FINISHED}
    # Written through a codec, the checkpoint is an envelope, not the output's text: it is kept.
    assert _finish(sealed, "run-2")
    assert raw.hexists(keys.ckpt("run-2"), "3")
    assert _read_by_each_reader(sealed, "run-2") == {FINISHED}


def test_a_run_that_went_back_past_the_finished_seq_keeps_no_stale_payload_at_it(
    store: RedisStore, raw: redis.Redis
) -> None:
    """A run that started over below its latest (a checkpoint it could not read) finishes at a seq
    whose payload an earlier path saved: that payload goes with the ones after it."""
    make_run(store, "run-1")
    ctx = _claim(store, "run-1", ACTION.fingerprint)
    for seq in (1, 2, 3, 4):
        store.save_checkpoint(ctx, Boundary(f'{{"at":{seq}}}', seq=seq, next_node="s1"))
    assert store.succeed(ctx, OUTPUT, checkpoint=FINISHED, seq=3)
    assert sorted(raw.hkeys(keys.ckpt("run-1"))) == [b"1", b"2"]
    assert [c.seq for c in store.checkpoints("run-1")] == [1, 2, 3]
    assert _read_by_each_reader(store, "run-1") == {FINISHED}
