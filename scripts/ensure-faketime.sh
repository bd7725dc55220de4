#!/usr/bin/env bash
# Make sure Debian's faketime (libfaketime) is installed: the clock-skew tests start one worker
# under `faketime -f +120s` (and -120s) to prove that leases, timers and rate limits keep the
# store's time, not the worker's (docs/guarantees.md, G11).
set -euo pipefail

have() { command -v faketime >/dev/null 2>&1; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"
ensure_apt_package "the clock-skew tests need faketime (libfaketime); install it and put it on PATH" faketime
echo "faketime: $(command -v faketime)"
