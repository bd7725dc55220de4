"""How many modules a reader opens to follow a checkpoint save, from the Celery task to the Lua.

``python -m bench.reader_path``: runs the ``five_steps`` graph once in process, as the
``reflexr_graph.run`` task does (``fleet.task.handle``), on a private Redis, after a first run
that sets the store and its connections up. It notes the modules of reflexr-graph whose functions
are on the stack at the moment the first checkpoint save is sent (the EVALSHA of
``save_checkpoint``), plus the Lua the script is made of: the path a reader follows from
``fleet/task.py`` to the Lua save. It also counts every module whose code runs from the task's
start to that save. A module counts once however many of its functions run.
"""

from __future__ import annotations

import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import redis.connection

from bench.fleet_graph import five_steps
from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet import task
from reflexr_graph.fleet.worker import build_app
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import registry, scripts

PACKAGE = Path(scripts.__file__).resolve().parents[1]
QUEUE = "bench-reader-path"


def _lua_parts() -> list[str]:
    """The Lua files ``save_checkpoint``'s text is made of: its preludes and its body."""
    preludes = registry.entry("save_checkpoint").preludes
    return [*(f"store/lua/_{name}.lua" for name in preludes), "store/lua/save_checkpoint.lua"]


def _module(filename: str) -> str | None:
    path = Path(filename).resolve()
    return str(path.relative_to(PACKAGE)) if PACKAGE in path.parents else None


class _Watch:
    """Notes every module of reflexr-graph whose code runs until the first save is sent, and the
    modules on the stack at that send."""

    def __init__(self) -> None:
        self.sha = b""
        self.called: list[str] = []
        self.stack: list[str] = []

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not self.stack:
            name = _module(frame.f_code.co_filename)
            if name is not None and name not in self.called:
                self.called.append(name)

    def sent(self, command: Any) -> None:
        chunks = [command] if isinstance(command, bytes | str) else list(command)
        if self.stack or not self.sha:
            return
        if any(self.sha in (c if isinstance(c, bytes) else str(c).encode()) for c in chunks):
            names = (_module(frame.filename) for frame in traceback.extract_stack()[:-2])
            self.stack = list(dict.fromkeys(n for n in names if n is not None))


def on_the_path() -> _Watch:
    """Run one run of ``five_steps`` as the task does, watching the way to its first save."""
    watch = _Watch()
    original = redis.connection.AbstractConnection.send_packed_command

    def spy(self: Any, command: Any, check_health: bool = True) -> None:
        watch.sent(command)
        original(self, command, check_health)

    with RedisServer() as server:
        settings = load_settings(redis_url=server.url, queue=QUEUE, graphs=("bench.fleet_graph:five_steps",))
        app = build_app(settings)
        with Client(settings) as client:
            schemas.publish(client.store, [five_steps])
            watch.sha = client.store.scripts.sha("save_checkpoint").encode()
            # A first run sets the app's store and connections up; the second is the path of every run.
            task.handle(app, client.enqueue(five_steps.name, 0), (), {"graph": five_steps.name, "inputs": 0})
            run_id = client.enqueue(five_steps.name, 1)
            redis.connection.AbstractConnection.send_packed_command = spy  # type: ignore[method-assign]
            threading.setprofile(None)
            sys.setprofile(watch.profile)
            try:
                task.handle(app, run_id, (), {"graph": five_steps.name, "inputs": 1})
            finally:
                sys.setprofile(None)
                redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        app.store().close()
    return watch


def main() -> int:
    watch = on_the_path()
    if not watch.stack:
        print("error: no checkpoint save was seen; the graph did not run", file=sys.stderr)
        return 1
    path = [*watch.stack, *_lua_parts()]
    print("The path from the task to the Lua save (the stack at the send, outermost first):")
    print("\n".join(f"  {name}" for name in path))
    print(f"path: {len(path)} modules ({len(watch.stack)} Python, {len(path) - len(watch.stack)} Lua)")
    print(f"run: {len(watch.called)} modules run code from the task's start to the first save:")
    print("  " + " ".join(watch.called))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
