# Sourced by ensure-rabbitmq.sh and ensure-sentinel.sh: install a Debian package with apt-get
# unless `have` (a function the caller defines) already finds what the tests need.
# shellcheck source=scripts/as-root.sh
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

# ensure_apt_package PACKAGE HINT: HINT says what to install where apt-get is missing.
ensure_apt_package() {
    local package="$1" hint="$2"
    if have; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $package not found; $hint" >&2
        exit 1
    fi
    echo "installing $package with apt-get"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" </dev/null
    if ! have; then
        echo "error: $package still missing after the install; $hint" >&2
        exit 1
    fi
}
