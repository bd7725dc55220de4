#!/usr/bin/env bash
# Make sure Debian's tmux is installed: the tests of `reflexr-graph top` run it in a real
# terminal, a detached tmux session they type into (send-keys) and read (capture-pane).
set -euo pipefail

have() { command -v tmux >/dev/null 2>&1; }

# shellcheck source=scripts/apt-package.sh
source "$(dirname "$0")/apt-package.sh"
ensure_apt_package "the tests of reflexr-graph top need tmux; install it and put it on PATH" tmux
echo "tmux: $(tmux -V)"
