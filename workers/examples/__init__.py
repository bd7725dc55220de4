"""Example graphs every worker of the deployable app loads, alongside ``REFLEXR_GRAPHS``."""

from reflexr_graph import GraphAction
from workers.examples import triage as _triage

EXAMPLES: tuple[GraphAction, ...] = (_triage.triage,)
"""Each example's GraphAction; the modules (``workers.examples.triage``) hold their demo helpers."""

__all__ = ["EXAMPLES"]
