#!/bin/sh
# Starts the reflexr-graph worker, or runs the given command (e.g. `reflexr-graph status RUN`).
# `exec` replaces this shell, so Celery is PID 1 and gets SIGTERM directly (a shell would not
# forward it, and the orchestrator's SIGKILL would then cut the soft shutdown short).
set -eu

# Belt and braces: the image sets it too, but a manifest that overrides `env` must not lose it.
export REMAP_SIGTERM="${REMAP_SIGTERM:-SIGQUIT}"

if [ "$#" -eq 0 ]; then
    # -Q must name the queue the fleet sends to (REFLEXR_QUEUE, default "reflexr").
    # WORKER_CONCURRENCY (not a REFLEXR_ setting: unknown REFLEXR_* variables are rejected)
    # sizes the prefork pool; Celery's default is the host's CPU count, not the container's.
    set -- celery -A reflexr_graph.worker worker --loglevel=INFO -Q "${REFLEXR_QUEUE:-reflexr}" \
        --concurrency "${WORKER_CONCURRENCY:-2}"
fi
exec "$@"
