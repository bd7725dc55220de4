# Sourced by the ensure-*.sh scripts: install Debian packages with apt-get unless `have` (a
# function the caller defines) already finds what the tests need.
# shellcheck source=scripts/as-root.sh
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

# apt-get update once for the five ensure-*.sh that `make test` runs, not once each: skipped while
# the stamp of the last one (apt leaves the lists untouched when nothing changed) is under an hour old.
APT_UPDATED_STAMP="${TMPDIR:-/tmp}/reflexr-graph-apt-updated"
apt_update_once() {
    if [ -n "$(find "$APT_UPDATED_STAMP" -mmin -60 2>/dev/null)" ]; then
        return 0
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    touch "$APT_UPDATED_STAMP"
}

# ensure_apt_package HINT PACKAGE...: HINT says what to install where apt-get is missing.
ensure_apt_package() {
    local hint="$1"
    shift
    if have; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: $* not found; $hint" >&2
        exit 1
    fi
    echo "installing $* with apt-get"
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" </dev/null
    if ! have; then
        echo "error: $* still missing after the install; $hint" >&2
        exit 1
    fi
}
