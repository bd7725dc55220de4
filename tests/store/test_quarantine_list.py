"""The quarantine list on a real Redis: capped length, counts that outlive the cap, items kept as
text or base64 and cut at RAW_LIMIT, purge."""

from __future__ import annotations

import base64

import pytest
import redis

from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.model import RAW_LIMIT, QuarantinedItem
from reflexr_graph.store import keys
from reflexr_graph.store.quarantine import MAXLEN, Quarantine
from tests.redis_server import NO_RETRY

pytestmark = pytest.mark.timeout(60)


def put(q: Quarantine, raw: bytes, reason: str = "not_json", queue: str = "reflexr") -> None:
    q.put(QuarantinedItem.of(queue=queue, reason=reason, detail="the item is not JSON", raw=raw))


def test_the_list_keeps_the_newest_maxlen_entries_and_counts_them_all(redis_client: redis.Redis) -> None:
    q = Quarantine(redis_client)
    for i in range(MAXLEN + 5):
        put(q, f"item {i}".encode(), reason="not_json" if i % 2 else "not_utf8")
    assert q.length() == MAXLEN
    items = q.items(limit=MAXLEN + 10)
    assert len(items) == MAXLEN
    assert items[0].raw == f"item {MAXLEN + 4}" and items[-1].raw == "item 5", "newest first, oldest dropped"
    assert q.counts() == {"not_json": (MAXLEN + 5) // 2, "not_utf8": (MAXLEN + 5) - (MAXLEN + 5) // 2}
    assert q.purge() == MAXLEN
    assert q.length() == 0 and q.counts() == {}
    assert not redis_client.exists(keys.QUARANTINE, keys.QUARANTINE_COUNTS)


def test_an_entry_keeps_text_as_text_bytes_as_base64_and_cuts_a_huge_item(redis_client: redis.Redis) -> None:
    q = Quarantine(redis_client)
    put(q, "héllo".encode())
    put(q, b"\xff\xfe\x00binary")
    huge = ("a" + "é" * RAW_LIMIT).encode()  # "é" is two bytes: the cut falls inside one
    put(q, huge)
    cut, binary, text = q.items()
    assert (text.raw, text.encoding, text.size, text.truncated) == ("héllo", "text", 6, False)
    assert (binary.encoding, binary.raw_bytes(), binary.truncated) == ("base64", b"\xff\xfe\x00binary", False)
    assert base64.b64decode(binary.raw) == b"\xff\xfe\x00binary"
    assert (cut.encoding, cut.size, cut.truncated) == ("text", len(huge), True)
    assert cut.raw == "a" + "é" * ((RAW_LIMIT - 1) // 2), "only the split character is dropped"
    assert {i.queue for i in (cut, binary, text)} == {"reflexr"} and text.time_ms > 0


def test_reading_the_list_without_redis_is_store_unavailable() -> None:
    q = Quarantine(redis.Redis(port=1, socket_connect_timeout=1, retry=NO_RETRY))
    with pytest.raises(StoreUnavailable):
        q.length()
