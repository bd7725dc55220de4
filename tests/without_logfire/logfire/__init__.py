"""Stands in for logfire in the suite's subprocesses, so they run as a deployment does.

logfire is a dev dependency only (tests/observability's span probe configures it); a deployment
has just logfire-api, which pydantic-graph imports and which is a no-op shim when ``import logfire``
fails. Installed, logfire would be imported by every worker, CLI and server the suite starts (about
half a second of CPU each). tests/subprocesses.py puts this directory first on their PYTHONPATH.
"""

raise ImportError("logfire is left out of the test suite's subprocesses (tests/subprocesses.py)")
