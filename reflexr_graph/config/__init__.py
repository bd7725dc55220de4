"""What producers and workers share: settings, the broker's configuration, the Celery config, dispatch.

This package sits below both ``reflexr_graph.client`` and ``reflexr_graph.fleet``: a client that sends
runs needs the same settings and Celery configuration as the workers that run them, but none of the
worker's code (graph registry, attempt, reaper).
"""
