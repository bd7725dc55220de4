"""The graphs whose checkpoints cross pydantic-graph releases: a chain, a map and a broadcast
(each with a join whose parent fork is the start, so saved fork stacks carry node-run ids), and
a decision typed by inference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reflexr_graph import GraphAction
from tests.core import graphs

CASES: dict[str, tuple[Callable[[], GraphAction], Any]] = {
    "linear": (lambda: graphs.linear(n=4), 1),
    "map_join_farthest": (lambda: graphs.map_join(closest=False), 3),
    "map_join_closest": (lambda: graphs.map_join(closest=True), 3),
    "broadcast": (graphs.broadcast, 1),
    "decision": (graphs.decision_after_step, 7),
}
