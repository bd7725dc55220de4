"""The job that beats this worker's presence (fleet/presence.py) in every pass, holder or not.

The loop beats between passes too (fleet/reaper.py: Reaper._sleep), where an unreachable Redis is
left for the next pass to say; here, a failed beat ends the pass. Beating before the share
(reaping/shares.py) keeps this worker among the live ones that divide the shards. It reads nothing
from the pass's read; :meth:`Presence.maybe_beat` says when a beat is due.
"""

from __future__ import annotations

from reflexr_graph.fleet.presence import Presence
from reflexr_graph.fleet.reaping.job import Pass


class Beat:
    """Beats ``presence`` when its beat is due."""

    holder_only = False

    def __init__(self, presence: Presence) -> None:
        self.presence = presence

    def run(self, current: Pass) -> None:
        self.presence.maybe_beat()
