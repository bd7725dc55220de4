#!/usr/bin/env bash
# Make sure Debian's chromium and chromium-driver are installed: the console's browser tests
# drive /usr/bin/chromium through /usr/bin/chromedriver (Selenium is given that path, so it
# never downloads a driver or a browser, which this project's machines could not do anyway).
set -euo pipefail

CHROMIUM=/usr/bin/chromium
DRIVER=/usr/bin/chromedriver

have_both() { [ -x "$CHROMIUM" ] && [ -x "$DRIVER" ]; }

# shellcheck source=scripts/as-root.sh
source "$(dirname "$0")/as-root.sh"

if ! have_both; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $CHROMIUM and $DRIVER are needed for the browser tests; install Debian's chromium and chromium-driver" >&2
        exit 1
    fi
    echo "installing chromium and chromium-driver with apt-get"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver </dev/null
    if ! have_both; then
        echo "error: $CHROMIUM or $DRIVER still missing after the install" >&2
        exit 1
    fi
fi
echo "chromium: $("$CHROMIUM" --version 2>/dev/null | head -n1); driver: $("$DRIVER" --version | awk '{print $2}')"
