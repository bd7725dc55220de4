#!/usr/bin/env bash
# Make sure Debian's redis-sentinel is installed: the high-availability tests start a primary,
# a replica and a sentinel of their own on free ports (tests/fleet/sentinel.py). A system
# sentinel the package may start on 26379 is harmless: nothing here uses it.
set -euo pipefail

have_sentinel() { command -v redis-sentinel >/dev/null 2>&1; }

# shellcheck source=scripts/as-root.sh
source "$(dirname "$0")/as-root.sh"

if ! have_sentinel; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: redis-sentinel not found; install Redis Sentinel 6.2+ and put it on PATH" >&2
        exit 1
    fi
    echo "installing redis-sentinel with apt-get"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-sentinel </dev/null
    if ! have_sentinel; then
        echo "error: redis-sentinel still not on PATH after the install" >&2
        exit 1
    fi
fi
echo "redis-sentinel: $(command -v redis-sentinel)"
