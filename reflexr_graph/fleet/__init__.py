"""The fleet: the Celery task that runs one attempt, the lease heartbeat, the reaper, settings.

Modules are imported where used rather than re-exported here, so importing
``reflexr_graph.fleet.settings`` (as the client does) does not pull in Celery's worker side.
"""
