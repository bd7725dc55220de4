"""Sans-IO core: graph analysis, the checkpoint format and the attempt driver.

Nothing under ``core`` imports redis or celery; the driver talks to storage through
``core.port.CheckpointPort``.
"""
