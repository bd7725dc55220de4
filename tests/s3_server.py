"""A real S3-compatible server for the S3 payload store's tests: moto's standalone server, started
as a process on a free port (no Docker), and killed by its pid afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reflexr_graph.local_processes import free_port, spawn
from tests.waiting import wait_for

START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """What boto3 needs to use this server (the standard AWS variables)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }

    def new_bucket(self) -> str:
        import boto3  # type: ignore[import-untyped]

        name = f"payloads-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, **_credentials()).create_bucket(Bucket=name)
        return name


def _credentials() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    port = free_port()
    log = Path(tmp_path_factory.mktemp("moto")) / "moto.log"
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc: subprocess.Popen[bytes] = spawn(argv, dict(os.environ), log)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is None and _answers(endpoint), START_TIMEOUT_S, "moto's S3 server")
        yield S3Server(endpoint)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
