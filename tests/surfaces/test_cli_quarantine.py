"""``dlq messages`` and ``dlq messages --purge`` against a real Redis holding quarantined queue items."""

from __future__ import annotations

import json

import pytest
import redis

from reflexr_graph.model import QuarantinedItem
from reflexr_graph.store.quarantine import Quarantine
from tests.surfaces.conftest import Cli

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def quarantine(redis_client: redis.Redis) -> Quarantine:
    q = Quarantine(redis_client)
    q.put(
        QuarantinedItem.of(queue="reflexr", reason="not_json", detail="the item is not JSON", raw=b"not json")
    )
    q.put(
        QuarantinedItem.of(
            queue="reflexr", reason="not_utf8", detail="the item is not UTF-8", raw=b"\xff\x00"
        )
    )
    return q


def test_messages_lists_the_items_newest_first(cli: Cli, quarantine: Quarantine) -> None:
    result = cli("dlq", "messages", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["length"] == 2 and shown["counts"] == {"not_json": 1, "not_utf8": 1}
    assert [(i["reason"], i["raw"], i["encoding"]) for i in shown["items"]] == [
        ("not_utf8", "/wA=", "base64"),
        ("not_json", "not json", "text"),
    ]
    table = cli("dlq", "messages")
    assert table.returncode == 0, table.stderr
    assert "not_json" in table.stdout and "not json" in table.stdout and "(2 bytes, not text)" in table.stdout


def test_purge_asks_first_then_deletes_them(cli: Cli, quarantine: Quarantine) -> None:
    declined = cli("dlq", "messages", "--purge", stdin="n\n")
    assert declined.returncode == 1 and "nothing was changed" in declined.stderr
    assert quarantine.length() == 2
    done = cli("dlq", "messages", "--purge", "--yes")
    assert done.returncode == 0, done.stderr
    assert "deleted 2 quarantined queue item(s)" in done.stdout
    assert quarantine.length() == 0 and quarantine.counts() == {}
    again = cli("dlq", "messages", "--purge", "--yes")
    assert again.returncode == 0 and "nothing to delete" in again.stdout
