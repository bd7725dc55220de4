"""The fleet: the Celery task that runs one attempt, the lease heartbeat, the reaper.

Modules are imported where used rather than re-exported here. What producers share with the fleet
(settings, the broker's and Celery's configuration, dispatch) lives below it, in ``reflexr_graph.config``.
"""
