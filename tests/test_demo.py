"""`make run` / `reflexr-graph demo`: the whole showcase on an embedded Redis, end to end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from reflexr_graph.local_processes import environment, free_port
from reflexr_graph.store import fanout, keys
from tests import subprocesses
from tests.redis_server import NO_RETRY, RedisServer
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra_env: str) -> dict[str, str]:
    # Wide enough that no table cell wraps: the assertions read whole phrases.
    return environment({"PYTHONPATH": subprocesses.PYTHONPATH, "COLUMNS": "200", **extra_env})


def _demo(cwd: Path, *args: str, expect: int = 0, **extra_env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "reflexr_graph", "demo", *args],
        cwd=cwd,
        env=_env(**extra_env),
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = done.stdout + done.stderr
    assert done.returncode == expect, out
    return " ".join(out.split())


@dataclass
class Started:
    """A ``demo`` started in the background (:func:`_start`), its output going to a file."""

    cwd: Path
    proc: subprocess.Popen[bytes]
    out: Path

    def finish(self) -> tuple[int, str]:
        """Its exit code and everything it printed, its whitespace collapsed, once it has ended."""
        try:
            code = self.proc.wait(timeout=200)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return code, " ".join(self.out.read_text().split())


def _start(cwd: Path, *args: str, **extra_env: str) -> Started:
    out = cwd / "demo-output.txt"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reflexr_graph", "demo", *args], cwd=cwd, env=_env(**extra_env),
            stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return Started(cwd, proc, out)


@dataclass
class Others:
    """The demos that run beside :func:`served`: on a Redis of the test's (REFLEXR_REDIS_URL), and
    with ``--keep``; their outcome, once each has ended."""

    given_redis: RedisServer
    given: tuple[int, str]
    given_cwd: Path
    kept: tuple[int, str]
    kept_cwd: Path


@dataclass
class Served:
    """One ``demo --serve`` on its private Redis, watched from start to Ctrl-C (:func:`served`)."""

    cwd: Path
    port: int
    console_line: str
    """The line that names the console's URL."""
    runs: list[dict[str, object]]
    """What the console's API listed while it served."""
    up_while_serving: bool
    code: int
    text: str
    """Everything it printed, its whitespace collapsed."""


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Others]]:
    """The three demos the tests look at, run side by side (a demo takes 20 s or more, most of it
    waiting: for a slow step, a lease to lapse, a retry's backoff), each on its own Redis in its own
    directory: ``--serve``, one on a Redis of the test's, and one with ``--keep``."""
    given_redis = RedisServer().start()
    try:
        given_cwd, kept_cwd = tmp_path_factory.mktemp("demo-given"), tmp_path_factory.mktemp("demo-kept")
        given = _start(given_cwd, REFLEXR_REDIS_URL=given_redis.url)
        kept = _start(kept_cwd, "--keep")
        try:
            shown = _served(tmp_path_factory)
        finally:
            others = Others(given_redis, given.finish(), given_cwd, kept.finish(), kept_cwd)
        yield shown, others
    finally:
        given_redis.close()
        _stop_kept(kept_cwd)


def _stop_kept(cwd: Path) -> None:
    """Stop the Redis a ``--keep`` demo in ``cwd`` left running, if it still runs (its test stops it)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        kept = json.loads((cwd / ".run" / "redis" / "kept.json").read_text())
        if _answers(kept["url"]):
            os.kill(int(kept["pid"]), signal.SIGTERM)


@pytest.fixture(scope="module")
def served(demos: tuple[Served, Others]) -> Served:
    """The whole showcase once, for the tests of what it shows and of ``--serve`` (which runs it first,
    then serves until SIGINT, then ends as a plain demo does)."""
    return demos[0]


def _served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    cwd, port = tmp_path_factory.mktemp("demo-serve"), free_port()
    env = environment({"PYTHONPATH": subprocesses.PYTHONPATH, "COLUMNS": "200"})
    cmd = [sys.executable, "-m", "reflexr_graph", "demo", "--serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "console: http://127.0.0.1:" in line:
                break
        # serve prints the token it generated in the console's URL (#token=...): the API needs it.
        token = next(iter(re.findall(r"#token=([A-Za-z0-9_-]+)", "".join(seen))), "")
        runs = wait_for(lambda: _runs(port, token), what="the console's API") if proc.poll() is None else []
        up = proc.poll() is None
        os.killpg(proc.pid, signal.SIGINT)
        seen.extend(proc.stdout)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    console_line = next((line for line in seen if "console: http://127.0.0.1:" in line), "".join(seen))
    return Served(cwd, port, console_line, runs, up, code, " ".join("".join(seen).split()))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_survives_a_crash_dead_letters_and_replays(served: Served) -> None:
    """The demo kills a worker mid-step, dead-letters a poison run, replays it, and every run succeeds;
    it names the step that was in flight and explains its table's columns."""
    text = served.text
    assert served.code == 0, text
    assert "while crash-me's escalate step" in text
    assert "of the 8 step executions done before the crash (plan:1 classify:6 assess:1), 0 ran again" in text
    assert "only escalate, the step in flight, ran again (2 times in all)" in text
    assert "poison was dead-lettered after 3 attempts" in text
    assert "its plan step ran 1x" in text
    assert "3 + 1 after replay" in text, "the summary shows the attempts before and after the replay"
    assert "saved 5, before map, assess, decide, file and its output at the end" in text
    # The legend accounts for the poison run's classify count against its 3 documents × 4 attempts,
    # whichever way the timing of its failing branches made it fall.
    assert re.search(r"poison's classify:(12 is|\d+, where) 3 documents × 4 attempts", text), text
    assert "is waiting for the signal 'approval': it holds no worker and no queue message" in text
    assert "on-call answered: reflexr-graph signal" in text
    assert "on-call succeeded (approved by on-call) on attempt 1" in text
    assert "the page (a durable call) was made once" in text
    assert "every run succeeded" in text
    assert "demo --keep" in text, "a normal run says how to keep its Redis for a look afterwards"
    assert (served.cwd / ".run" / "redis" / "appendonlydir").is_dir(), (
        "the private Redis keeps its AOF in .run/"
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_uses_the_redis_that_reflexr_redis_url_names(demos: tuple[Served, Others]) -> None:
    """With REFLEXR_REDIS_URL set, the demo runs on that Redis and starts no private one."""
    others = demos[1]
    server, (code, text) = others.given_redis, others.given
    assert code == 0, text
    assert "every run succeeded" in text and f"127.0.0.1:{server.port}" in text
    assert not (others.given_cwd / ".run" / "redis").exists()
    with server.client() as r:
        assert fanout.total(r, keys.all_runs) == 9, "the runs were recorded in the given Redis"


def _clients(url: str) -> list[str]:
    with redis.Redis.from_url(url, retry=NO_RETRY, decode_responses=True) as r:
        return [c.get("name", "") for c in r.client_list()]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_keep_leaves_its_redis_running_with_the_runs(demos: tuple[Served, Others]) -> None:
    """--keep: the private Redis outlives the demo, with its runs, its workers gone, and the commands
    to look at it printed; the next demo refuses to share its data dir until it is stopped."""
    cwd = demos[1].kept_cwd
    code, text = demos[1].kept
    assert code == 0, text
    kept = json.loads((cwd / ".run" / "redis" / "kept.json").read_text())
    url, pid = kept["url"], int(kept["pid"])
    try:
        assert f"left the demo's Redis running at {url} (redis-server pid {pid}" in text
        assert f"export REFLEXR_REDIS_URL={url}" in text and f"kill {pid}" in text
        with redis.Redis.from_url(url, retry=NO_RETRY) as r:
            assert int(r.info("server")["process_id"]) == pid
            assert fanout.total(r, keys.all_runs) == 9, "the kept Redis holds the demo's runs"
        # Every connection but this one has closed: the workers were stopped.
        wait_for(lambda: len(_clients(url)) == 1, 30, "only the test's own connection")
        refused = _demo(cwd, expect=1)
        assert f"still uses {cwd.resolve() / '.run' / 'redis'}" in refused and f"kill {pid}" in refused
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # as the demo's message says
    wait_for(lambda: not _answers(url), 20, "the kept Redis to stop")


def _answers(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_timeout=1.0, retry=NO_RETRY) as r:
            return bool(r.ping())
    except redis.ConnectionError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_serve_prints_the_console_url_and_stays_up_until_ctrl_c(served: Served) -> None:
    """`demo --serve` serves the demo's runs on the console until SIGINT (Ctrl-C), then stops everything."""
    assert f"http://127.0.0.1:{served.port}/#token=" in served.console_line, served.text
    runs = served.runs
    assert len(runs) == 9 and {r["status"] for r in runs} == {"succeeded"}
    assert served.up_while_serving, "it stays up until Ctrl-C"
    assert served.code == 0


def _runs(port: int, token: str) -> list[dict[str, object]] | None:
    auth = {"Authorization": f"Bearer {token}"}
    try:
        found: list[dict[str, object]] = httpx.get(
            f"http://127.0.0.1:{port}/api/runs", headers=auth, timeout=5
        ).json()["runs"]
    except httpx.HTTPError:
        return None
    return found
