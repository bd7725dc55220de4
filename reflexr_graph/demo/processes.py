"""The processes the demo starts and stops: worker subprocesses always, a private Redis unless kept
(both launched by reflexr_graph.local_processes and local_redis, as the benchmarks and tests do)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis
from celery.utils.imports import cwd_in_path

from reflexr_graph.errors import Kind, ReflexrError
from reflexr_graph.local_processes import Worker, celery_worker_argv, environment, start_worker
from reflexr_graph.local_redis import NO_RETRY, RedisServer

RUN_DIR = Path(".run")
KEPT_FILE = "kept.json"
"""In the private Redis's data dir: the pid and URL of a server ``demo --keep`` left running."""


@dataclass
class Fleet:
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    def start_worker(self, name: str, concurrency: int = 2) -> Worker:
        argv = celery_worker_argv("workers", self.env["REFLEXR_QUEUE"], name, concurrency=concurrency)
        worker = start_worker(name, argv, self.env, RUN_DIR / f"{name}.log")
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def worker_env(redis_url: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """The demo workers' environment: this one, minus any REFLEXR_* the user set, plus the demo's."""
    env = environment({"REFLEXR_REDIS_URL": redis_url, "REMAP_SIGTERM": "SIGQUIT", **overrides})
    # The workers run the repository's app (`celery -A workers`) and its example, from the checkout.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH", "")]))
    return env


class ExampleMissing(ReflexrError):
    """The demo's graph, the repository's bundled example, is not importable from here."""

    error_kind = Kind.INVALID


EXAMPLE_MODULE = "workers.examples.triage"


def check_example() -> None:
    """Refuse to start unless the workers will find the bundled example: it is in a checkout of the
    repository (``workers/examples``), not in the installed package, and they import it from the
    working directory (:func:`worker_env`)."""
    with cwd_in_path():
        try:
            found = importlib.util.find_spec(EXAMPLE_MODULE) is not None
        except ModuleNotFoundError:
            found = False
    if not found:
        raise ExampleMissing(
            f"the demo runs the repository's bundled example ({EXAMPLE_MODULE}), which the installed "
            "package does not include: run it from the root of a checkout of reflexr-graph (make run)"
        )


class KeptRedisRunning(ReflexrError):
    """A Redis that an earlier ``demo --keep`` left running still uses the demo's data dir."""

    error_kind = Kind.CONFLICT


def _kept_server(data_dir: Path) -> tuple[int, str] | None:
    """The pid and URL of a Redis kept in ``data_dir`` that still answers as that process, if any."""
    try:
        kept = json.loads((data_dir / KEPT_FILE).read_text())
        pid, url = int(kept["pid"]), str(kept["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        with redis.Redis.from_url(url, socket_timeout=1.0, retry=NO_RETRY) as r:
            answering = int(r.info("server")["process_id"])
    except (redis.RedisError, OSError):
        return None
    # The pid check guards against another server that took the port since.
    return (pid, url) if answering == pid else None


@contextlib.contextmanager
def private_redis(*, keep: bool = False) -> Iterator[RedisServer]:
    """The embedded default: a redis-server with AOF on, its data under .run/redis, on a free port.

    Every demo starts it empty, so what ``--keep`` leaves holds that demo's runs only. It runs in
    a session of its own, so a Ctrl-C reaches the demo, which then stops it, or with ``keep``
    leaves it running and records it in .run/redis/kept.json.
    """
    data_dir = RUN_DIR.resolve() / "redis"
    kept = _kept_server(data_dir)
    if kept is not None:
        raise KeptRedisRunning(
            f"a Redis left running by `reflexr-graph demo --keep` still uses {data_dir} ({kept[1]}, "
            f"pid {kept[0]}); stop it first with: kill {kept[0]}"
        )
    shutil.rmtree(data_dir, ignore_errors=True)
    server = RedisServer(appendonly=True, appendfsync="everysec", data_dir=data_dir, own_session=True)
    server.start()
    try:
        yield server
    finally:
        if keep and server.running:
            pid = server.detach()
            (data_dir / KEPT_FILE).write_text(json.dumps({"pid": pid, "url": server.url}))
        else:
            server.close()
