#!/usr/bin/env bash
# Make sure Debian's redis-sentinel is installed: the high-availability tests start a primary,
# a replica and a sentinel of their own on free ports (tests/fleet/sentinel.py). A system
# sentinel the package may start on 26379 is harmless: nothing here uses it.
set -euo pipefail

have() { command -v redis-sentinel >/dev/null 2>&1; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"
ensure_apt_package "install Redis Sentinel 6.2+ and put redis-sentinel on PATH" redis-sentinel
echo "redis-sentinel: $(command -v redis-sentinel)"
