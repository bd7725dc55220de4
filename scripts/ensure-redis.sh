#!/usr/bin/env bash
# Make sure a redis-server binary is available. The tests start their own servers on free
# ports, so only the binary matters; a system service that the package may start on 6379 is
# harmless because nothing here uses that port.
set -euo pipefail

MIN_VERSION="7.0"

have_redis() { command -v redis-server >/dev/null 2>&1; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"

install_redis() {
    if command -v apt-get >/dev/null 2>&1; then
        echo "installing redis-server with apt-get"
        apt_update_once
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server </dev/null
    elif [ "$(uname -s)" = "Darwin" ] && command -v brew >/dev/null 2>&1; then
        echo "installing redis with Homebrew"
        brew install redis
    else
        echo "error: redis-server not found. Install redis-server ${MIN_VERSION}+ and put it on PATH." >&2
        exit 1
    fi
}

warn_if_old() {
    local version
    version="$(redis-server --version | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p')"
    if [ -n "$version" ] && [ "$(printf '%s\n%s\n' "$MIN_VERSION" "$version" | sort -V | head -n1)" != "$MIN_VERSION" ]; then
        echo "warning: redis-server $version is older than $MIN_VERSION, the oldest that runs reflexr's scripts (script flags); the tests will fail" >&2
    fi
}

if ! have_redis; then
    install_redis
    if ! have_redis; then
        echo "error: redis-server still not on PATH after install; install redis-server ${MIN_VERSION}+" >&2
        exit 1
    fi
fi
warn_if_old
echo "redis-server: $(command -v redis-server) ($(redis-server --version | awk '{print $3}'))"
