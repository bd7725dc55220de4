"""Example graphs, loaded only by a worker whose ``REFLEXR_GRAPHS`` names them.

``reflexr-graph demo`` starts its workers with ``REFLEXR_GRAPHS=workers.examples.triage:triage``;
to try the example on a fleet of your own, add that reference to its ``REFLEXR_GRAPHS``.
"""

TRIAGE = "workers.examples.triage:triage"
"""The ``REFLEXR_GRAPHS`` reference of the document-triage example."""

__all__ = ["TRIAGE"]
