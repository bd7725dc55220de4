#!/usr/bin/env bash
# Make sure Debian's chromium and chromium-driver are installed: the console's browser tests
# drive /usr/bin/chromium through /usr/bin/chromedriver (Selenium is given that path, so it
# never downloads a driver or a browser, which this project's machines could not do anyway).
set -euo pipefail

CHROMIUM=/usr/bin/chromium
DRIVER=/usr/bin/chromedriver

have() { [ -x "$CHROMIUM" ] && [ -x "$DRIVER" ]; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"
ensure_apt_package "the browser tests need $CHROMIUM and $DRIVER; install Debian's chromium and chromium-driver" \
    chromium chromium-driver
echo "chromium: $("$CHROMIUM" --version 2>/dev/null | head -n1); driver: $("$DRIVER" --version | awk '{print $2}')"
