"""A private rabbitmq-server subprocess for the tests: free ports, its own directory and cookie.

Nothing of it is shared with a system RabbitMQ: the node name, the AMQP port, the Erlang
distribution port and epmd's port are picked free, and its data, logs, config and Erlang
cookie (``$HOME/.erlang.cookie``) live in a temporary directory that is removed afterwards.
The node runs in a session of its own, so :meth:`RabbitMQServer.close` stops it and its epmd
by process group and pid, never by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Self

import amqp

from reflexr_graph.local_processes import free_port

SERVER_SCRIPT = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""Debian's script proper; /usr/sbin/rabbitmq-server switches to the rabbitmq user first."""
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
CONSUMER_TIMEOUT_MS = 2 * 3600 * 1000
"""As deploy/rabbitmq/rabbitmq.conf: well above the longest attempt (docs/design.md)."""


class RabbitMQUnavailable(RuntimeError):
    """rabbitmq-server is not installed, or did not start; the message says which and why."""


def server_script() -> str:
    if os.path.exists(SERVER_SCRIPT):
        return SERVER_SCRIPT
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise RabbitMQUnavailable("rabbitmq-server is not installed; run `bash scripts/ensure-rabbitmq.sh`")
    return found


class RabbitMQServer:
    """One RabbitMQ node on 127.0.0.1; ``url`` is its AMQP URL (guest, default vhost)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="reflexr-rabbitmq-"))
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"reflexr-{uuid.uuid4().hex[:8]}@localhost"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def env(self) -> dict[str, str]:
        d = self.dir
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(d),  # the Erlang cookie is created here, private to this node
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_BASE": str(d),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_LOGS": str(d / "log" / "rabbit.log"),
            "RABBITMQ_PID_FILE": str(d / "rabbit.pid"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_ENABLED_PLUGINS": "",
        }

    def _write_config(self) -> None:
        (self.dir / "log").mkdir()
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            f"consumer_timeout = {CONSUMER_TIMEOUT_MS}\n"
            # The tests' disks are small and shared; the default alarm (50 MB free) is kept.
            "log.console = false\n"
        )

    def start(self) -> Self:
        self._write_config()
        with (self.dir / "stdout.log").open("wb") as out:
            self._proc = subprocess.Popen(
                [server_script()],
                env=self.env(),
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except RabbitMQUnavailable:
            self.close()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        delay = 0.05
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RabbitMQUnavailable(
                    f"rabbitmq-server exited with {self._proc.returncode} at startup: {self._diag()}"
                )
            if self._answers():
                return
            time.sleep(delay)  # backoff between polls, not the wait itself
            delay = min(delay * 2, 0.5)
        raise RabbitMQUnavailable(f"rabbitmq-server not ready after {START_TIMEOUT_S:g}s: {self._diag()}")

    def _answers(self) -> bool:
        conn = amqp.Connection(f"127.0.0.1:{self.port}", userid="guest", password="guest", connect_timeout=1)
        try:
            conn.connect()
        except (OSError, amqp.exceptions.AMQPError):
            return False
        with contextlib.suppress(OSError, amqp.exceptions.AMQPError):
            conn.close()
        return True

    def _diag(self) -> str:
        def tail(path: Path) -> str:
            text = path.read_text(errors="replace") if path.exists() else ""
            return "\n".join(text.splitlines()[-20:])

        stdout, log = tail(self.dir / "stdout.log"), tail(self.dir / "log" / "rabbit.log")
        return f"dir={self.dir}\nstdout:\n{stdout}\nlog:\n{log}"

    def close(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL of its group) and its epmd; remove the directory."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(STOP_TIMEOUT_S)
        self._stop_epmd()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _stop_epmd(self) -> None:
        # erl starts epmd as a daemon on ERL_EPMD_PORT, outside the node's process group; it is
        # ours alone (its own port), so asking it to exit touches no other node.
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [epmd, "-port", str(self.epmd_port), "-kill"],
                env={**self.env()},
                capture_output=True,
                timeout=10,
                check=False,
            )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
