# Sourced by the ensure-*.sh scripts: run a command as root, directly or through sudo when it
# exists (a developer's machine).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "error: need root to run: $*" >&2
        return 1
    fi
}
