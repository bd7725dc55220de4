"""``reflexr-graph top`` against a real worker: piped it prints once; in a real terminal (a
detached tmux session on a private socket, typed into with send-keys and read with
capture-pane) it redraws in place and ends on ``q`` or Ctrl-C."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis

from reflexr_graph.client import Client
from tests.surfaces.conftest import BIN, ROOT
from tests.surfaces.graphs import release_key
from tests.waiting import wait_for

EXITED = "top-exited-with"
"""What the pane's shell prints once ``top`` ends, with its exit code."""


def _count(screen: str, status: str) -> int | None:
    found = re.search(rf"│ {status}\s+│\s+(\d+) │", screen)
    return int(found.group(1)) if found else None


def _held_and_queued(client: Client, key: str) -> tuple[str, str]:
    """A blocker run that holds the one worker slot, and one queued behind it."""
    held = client.enqueue("blocker", key)
    wait_for(lambda: client.get(held).status.value == "running", what="the first run to start")
    return held, client.enqueue("blocker", f"{key}-2")


def test_top_piped_prints_the_fleet_once(
    cli_here: Callable[..., subprocess.CompletedProcess[str]],
    client: Client,
    worker: subprocess.Popen[bytes],
    redis_client: redis.Redis,
) -> None:
    _held_and_queued(client, "piped")
    wait_for(lambda: client.worker_statuses(), what="the worker to be listed")
    shown = cli_here("top")
    assert shown.returncode == 0, shown.stderr
    assert _count(shown.stdout, "running") == 1 and _count(shown.stdout, "queued") == 1
    assert re.search(r"│ blocker\s+│\s+1 │", shown.stdout), "one blocker run queued"
    assert "workers (1 live)" in shown.stdout and "surfaces-" in shown.stdout
    assert "dead letters: 0" in shown.stdout
    refused = cli_here("top", "--interval", "0")
    assert refused.returncode == 2 and "--interval" in refused.stderr
    for key in ("piped", "piped-2"):
        redis_client.rpush(release_key(key), 1)


def test_workers_lists_the_live_worker_with_its_clock_skew(
    cli_here: Callable[..., subprocess.CompletedProcess[str]], client: Client, worker: subprocess.Popen[bytes]
) -> None:
    wait_for(lambda: client.worker_statuses(), what="the worker to be listed")
    shown = cli_here("workers")
    assert shown.returncode == 0, shown.stderr
    assert "surfaces-" in shown.stdout and "clock skew" in shown.stdout
    assert re.search(r"[+-]\d+ms", shown.stdout), f"its clock against Redis's, in ms:\n{shown.stdout}"
    listed = json.loads(cli_here("workers", "--json").stdout)
    assert [w["info"]["pid"] for w in listed] == [worker.pid]
    assert abs(listed[0]["info"]["clock_skew_ms"]) < 1000


@dataclass
class Pane:
    """One tmux session on a private socket (its own server, killed at teardown)."""

    socket: str

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "top")


@pytest.fixture
def pane(env: dict[str, str]) -> Iterator[Pane]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: run `make tmux`")
    pane = Pane(f"rg-top-{uuid.uuid4().hex[:8]}")
    # The terminal's own size, as a person's would be: not the COLUMNS the piped tests are given.
    settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k != "COLUMNS")
    top = f"env {settings} {shlex.quote(str(BIN / 'reflexr-graph'))} top --interval 0.2"
    shell = f"cd {shlex.quote(str(ROOT))}; {top}; echo {EXITED} $?; sleep 600"
    pane.tmux("new-session", "-d", "-s", "top", "-x", "160", "-y", "60", shell)
    try:
        yield pane
    finally:
        subprocess.run(["tmux", "-L", pane.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_top_in_a_terminal_redraws_in_place_and_quits_on_a_key(
    key: str, pane: Pane, client: Client, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    run_key = f"tty-{uuid.uuid4().hex[:6]}"
    _held_and_queued(client, run_key)
    wait_for(lambda: _count(pane.screen(), "running") == 1, what="top to show the running run")
    wait_for(lambda: "workers (1 live)" in pane.screen(), what="top to show the worker")
    for released in (run_key, f"{run_key}-2"):
        redis_client.rpush(release_key(released), 1)
    # The same frame, redrawn: the succeeded runs show up in it, and the title stays one.

    def both_succeeded() -> str | None:
        screen = pane.screen()
        return screen if _count(screen, "succeeded") == 2 else None

    screen = wait_for(both_succeeded, what="both runs succeeded")
    assert screen.count("reflexr-graph top") == 1 and _count(screen, "running") == 0
    pane.tmux("send-keys", "-t", "top", key)
    wait_for(lambda: f"{EXITED} 0" in pane.screen(), what=f"top to exit 0 on {key}")
