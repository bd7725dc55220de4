#!/usr/bin/env bash
# Make sure Debian's rabbitmq-server is installed: the RabbitMQ broker tests start their own
# node on free ports in a temporary directory (tests/rabbitmq_server.py), so only the package
# matters. A system node the package may start on 5672 is harmless: nothing here uses it.
set -euo pipefail

SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server

have_rabbitmq() { [ -x "$SERVER" ] || command -v rabbitmq-server >/dev/null 2>&1; }

# shellcheck source=scripts/as-root.sh
source "$(dirname "$0")/as-root.sh"

if ! have_rabbitmq; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: rabbitmq-server not found; install RabbitMQ 3.10+ (its tests skip, saying so, without it)" >&2
        exit 1
    fi
    echo "installing rabbitmq-server with apt-get"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server </dev/null
    if ! have_rabbitmq; then
        echo "error: rabbitmq-server still missing after the install" >&2
        exit 1
    fi
fi
echo "rabbitmq-server: $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo installed)"
