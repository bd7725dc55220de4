"""A private redis-server subprocess: free port on 127.0.0.1, its own data dir.

The demo (``make run``), the benchmarks and the tests each start Redis servers they own,
so none of them touches a system Redis (6379) or depends on one being there.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reflexr_graph.errors import Kind, ReflexrError
from reflexr_graph.local_processes import free_port

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
_PORT_ATTEMPTS = 3
NO_RETRY = Retry(NoBackoff(), 0)

# Servers not yet closed; stopped at interpreter exit in case a fixture finalizer never ran.
_LIVE: set[RedisServer] = set()


class RedisServerError(ReflexrError, RuntimeError):
    """The local redis-server could not be found, started or used."""

    error_kind = Kind.FAILED


def _redis_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RedisServerError("redis-server not found on PATH; run `make redis` to install it")
    return path


class RedisServer:
    def __init__(
        self,
        *,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        password: str | None = None,
        extra_args: tuple[str, ...] = (),
        data_dir: Path | None = None,
        own_session: bool = False,
    ) -> None:
        """A given ``data_dir`` is kept (the demo keeps its AOF in .run/); the default temp dir is removed.

        ``own_session`` starts the server in a session of its own, so a Ctrl-C or a closed
        terminal reaches only this process, which decides whether the server stops (see
        :meth:`detach`).
        """
        self.appendonly = appendonly
        self.own_session = own_session
        self.appendfsync = appendfsync
        self.password = password
        self.extra_args = extra_args
        self._owns_dir = data_dir is None
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
        self.dir = data_dir or Path(tempfile.mkdtemp(prefix="reflexr-redis-"))
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- public API -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RedisServerError("server was never started")
        return self._port

    @property
    def pid(self) -> int:
        if self._proc is None or self._proc.poll() is not None:
            raise RedisServerError("server is not running")
        return self._proc.pid

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, *, loaded: bool = True) -> Self:
        """Start the server; returns once it answers and, unless ``loaded`` is False, has loaded its
        data (False: a test's clients meet the LOADING state of a restart)."""
        if self.running:
            return self
        _LIVE.add(self)
        if self._port is not None:  # restart: same port so clients and AOF stay valid
            self._spawn_and_wait(self._port, loaded=loaded)
            return self
        # A port picked by bind(0) can be taken before redis binds it; retry with a new one.
        for _ in range(_PORT_ATTEMPTS - 1):
            with contextlib.suppress(RedisServerError):
                self._spawn_and_wait(free_port())
                return self
        self._spawn_and_wait(free_port())  # last attempt: let the error propagate
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Graceful shutdown (SIGTERM flushes the AOF), SIGKILL if it does not exit in time."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._proc = None

    def kill(self) -> None:
        """Crash the server: no shutdown hooks, only what was already fsynced survives."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
        self._proc = None

    def restart(self) -> Self:
        self.stop()
        return self.start()

    def detach(self) -> int:
        """Leave the server running after this process exits, and return its pid (to stop it by).

        It is no longer stopped at exit, its data dir is never removed, and this object can
        no longer stop or restart it.
        """
        pid = self.pid
        assert self._proc is not None
        # Popen warns when it is collected while its child still runs (an unwaited child can
        # linger as a zombie). This one is meant to outlive us, and once we exit, init reaps it;
        # marking it done stops Popen from waiting for it or warning about it.
        self._proc.returncode = 0
        self._proc = None
        self._owns_dir = False
        _LIVE.discard(self)
        return pid

    def close(self) -> None:
        """Stop, and delete the data dir unless the caller gave it; the server cannot restart afterwards."""
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        _LIVE.discard(self)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisServer(port={self._port}, dir={self.dir}, running={self.running})"

    # -- internals --------------------------------------------------------------------------

    @property
    def _logfile(self) -> Path:
        return self.dir / "redis.log"

    @property
    def _stderr_file(self) -> Path:
        return self.dir / "stderr.log"

    def _argv(self, port: int) -> list[str]:
        argv = [
            _redis_binary(),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--logfile", str(self._logfile),
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "no",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            # Said, not left to redis.conf defaults: the store's durability check (workers, health
            # --redis) wants no eviction, and the demo's Redis must pass it.
            "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        if self.password:
            argv += ["--requirepass", self.password]
        return argv + list(self.extra_args)

    def _spawn_and_wait(self, port: int, *, loaded: bool = True) -> None:
        self._port = port
        # stderr goes to a file: config errors are printed there before --logfile takes over,
        # and an undrained pipe could block the server.
        with self._stderr_file.open("ab") as err:
            self._proc = subprocess.Popen(
                self._argv(port),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=self.own_session,
            )
        try:
            self._wait_ready(loaded=loaded)
        except RedisServerError:
            self.kill()
            raise

    def _wait_ready(self, *, loaded: bool = True) -> None:
        """Poll until the server answers and (if ``loaded``) has finished loading its AOF."""
        deadline = time.monotonic() + START_TIMEOUT
        delay = 0.005
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RedisServerError(f"redis-server exited with {self._proc.returncode}: {self._diag()}")
            if self._is_ready(self._proc.pid, loaded=loaded):
                return
            time.sleep(delay)  # backoff between polls, not the wait itself
            delay = min(delay * 2, 0.2)
        raise RedisServerError(f"redis-server not ready after {START_TIMEOUT}s: {self._diag()}")

    def _is_ready(self, pid: int, *, loaded: bool = True) -> bool:
        try:
            # No client-side retries: this loop is the retry, and it must see each failure.
            with redis.Redis(
                host="127.0.0.1", port=self.port, password=self.password, socket_timeout=1.0, retry=NO_RETRY
            ) as r:
                info = r.info()
        except (redis.ConnectionError, redis.TimeoutError):  # includes auth and LOADING errors
            return False
        # The process id guards against a port race answered by some other server; `loading`
        # is 1 while the AOF is replayed after a restart.
        return int(info["process_id"]) == pid and (int(info["loading"]) == 0 or not loaded)

    def _diag(self) -> str:
        def tail(path: Path) -> str:
            text = path.read_text(errors="replace") if path.exists() else ""
            return "\n".join(text.splitlines()[-15:])

        where = f"port={self._port} dir={self.dir}"
        return f"{where}\nstderr:\n{tail(self._stderr_file)}\nlog:\n{tail(self._logfile)}"


# Type of the `private_redis` fixture: takes RedisServer's keyword arguments, returns it started.
RedisFactory = Callable[..., RedisServer]


@atexit.register
def _close_all() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.close()
