"""A redis-server with TLS and a password, for tests of rediss:// URLs (needs openssl)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reflexr_graph.local_processes import free_port
from tests.redis_server import RedisFactory, RedisServer


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def tls_redis(private_redis: RedisFactory, directory: Path, password: str) -> tuple[RedisServer, int, Path]:
    """A started server with a plain port and a TLS port: ``(server, tls_port, ca_cert)``."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = _self_signed(directory)
    tls_port = free_port()
    tls_args = ("--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no")  # fmt: skip
    return private_redis(password=password, extra_args=tls_args), tls_port, cert
