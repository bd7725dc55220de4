"""The graph fingerprint: a checkpoint from a graph with another fingerprint is discarded.

It hashes the node ids and kinds, the edges (with their transforms) and the known input
types (docs/design.md#refinements), so an edge that gains a transform, or a node whose type changes,
changes it. It names types rather than hashing their schemas: a model that gains a
field keeps its fingerprint, and its old checkpoints are discarded as ``invalid``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from reflexr_graph.core.pg import Edge, Kind


def type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


def fingerprint(kinds: Mapping[str, Kind], edges: Iterable[Edge], types: Mapping[str, Any]) -> str:
    doc = {
        "nodes": sorted(f"{node}:{kind.value}" for node, kind in kinds.items()),
        "edges": sorted(f"{e.source}->{'|'.join(e.transforms)}->{e.destination}" for e in edges),
        "types": {node: type_name(tp) for node, tp in sorted(types.items())},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
