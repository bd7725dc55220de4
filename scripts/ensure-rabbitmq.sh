#!/usr/bin/env bash
# Make sure Debian's rabbitmq-server is installed: the RabbitMQ broker tests start their own
# node on free ports in a temporary directory (tests/rabbitmq_server.py), so only the package
# matters. A system node the package may start on 5672 is harmless: nothing here uses it.
set -euo pipefail

have() { [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"
ensure_apt_package "install RabbitMQ 3.10+ (its tests skip, saying so, without it)" rabbitmq-server
echo "rabbitmq-server: $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo installed)"
