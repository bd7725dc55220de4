"""Every CLI failure is one line on stderr that says what to fix (JSON with --json), never a traceback.

Exit codes: 3 when Redis cannot be used, 2 for bad usage or input, 1 for a failed command or
an unexpected error. Each wrong Redis URL is real: a server that was killed, a database number
it does not have, an HTTP server, a password it does not accept, TLS spoken to a plain port and
plain text to a TLS port. The password in the URL never shows in what the CLI prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from tests.redis_server import RedisFactory
from tests.surfaces.cli_runner import CliHere
from tests.surfaces.conftest import PASSWORD, Cli
from tests.tls import tls_redis


def _one_line_error(result_stderr: str) -> str:
    lines = result_stderr.strip().splitlines()
    assert len(lines) == 1, result_stderr
    assert "Traceback" not in result_stderr
    assert PASSWORD not in result_stderr
    return lines[0]


def _check_cli(cli: Cli, url: str, says: str, kind: str) -> None:
    """Plain and --json, on a read and on enqueue: exit 3, one line naming the fix."""
    plain = cli("--redis-url", url, "graphs")
    assert plain.returncode == 3, plain.stderr
    line = _one_line_error(plain.stderr)
    assert line.startswith("error: ") and says in line, line
    assert plain.stdout == ""
    as_json = cli("--redis-url", url, "enqueue", "counter", "--input", '{"key": "a", "n": 1}', "--json")
    assert as_json.returncode == 3, as_json.stderr
    problem = json.loads(_one_line_error(as_json.stderr))["error"]
    assert problem["exit_code"] == 3 and problem["kind"] == kind, problem
    assert says in problem["message"]
    assert as_json.stdout == ""


def test_redis_down(cli: Cli, dead_url: str) -> None:
    _check_cli(cli, dead_url, "connection refused", "refused")


def test_database_out_of_range(cli: Cli, redis_url: str) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/99"
    _check_cli(cli, url, "has no database 99 (it has 16: 0 to 15)", "db_index")


def test_a_url_error_names_where_the_url_came_from(cli_here: CliHere, redis_url: str) -> None:
    wrong_db = redis_url.rsplit("/", 1)[0] + "/5000"
    for given in (["--redis-url", wrong_db], [f"--redis-url={wrong_db}"]):
        flagged = cli_here(*given, "runs")
        assert flagged.returncode == 3, flagged.stderr
        assert "change the /5000 at the end of --redis-url" in flagged.stderr
        assert "REFLEXR_REDIS_URL" not in flagged.stderr
    bad_scheme = cli_here("--redis-url", "foo://x", "runs")
    assert (
        bad_scheme.returncode == 2 and "invalid settings: --redis-url: must start with" in bad_scheme.stderr
    )
    # Without the flag the URL came from the environment, and the message names that.
    env_only = cli_here("runs", env={"REFLEXR_REDIS_URL": wrong_db})
    assert env_only.returncode == 3 and "at the end of REFLEXR_REDIS_URL" in env_only.stderr


def test_not_a_redis_server(cli: Cli, http_port: int) -> None:
    _check_cli(cli, f"redis://127.0.0.1:{http_port}/0", "is --redis-url pointing at Redis?", "not_redis")


def test_password_missing_or_wrong(cli: Cli, private_redis: RedisFactory) -> None:
    server = private_redis(password=PASSWORD)
    _check_cli(cli, f"redis://127.0.0.1:{server.port}/0", "requires a password", "auth")
    _check_cli(cli, f"redis://:wrong-{PASSWORD}@127.0.0.1:{server.port}/0", "rejected the password", "auth")


@pytest.mark.timeout(180)
def test_tls_to_a_plain_port(cli: Cli, private_redis: RedisFactory) -> None:
    """rediss:// to a port without TLS: the handshake waits for the CLI's connect timeout, not
    the read timeout, and the error says to use redis://."""
    server = private_redis(password=PASSWORD)
    _check_cli(cli, f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0", "use redis://", "tls_mismatch")


def test_plain_text_to_a_tls_port(cli: Cli, private_redis: RedisFactory, tmp_path: Path) -> None:
    _server, tls_port, _cert = tls_redis(private_redis, tmp_path, PASSWORD)
    _check_cli(cli, f"redis://:{PASSWORD}@127.0.0.1:{tls_port}/0", "use rediss://", "tls_mismatch")


def test_untrusted_certificate(cli: Cli, private_redis: RedisFactory, tmp_path: Path) -> None:
    _server, tls_port, _cert = tls_redis(private_redis, tmp_path, PASSWORD)
    _check_cli(cli, f"rediss://:{PASSWORD}@127.0.0.1:{tls_port}/0", "ssl_ca_certs", "tls_certificate")


@pytest.mark.usefixtures("published")
def test_usage_errors_are_one_line(cli: Cli) -> None:
    missing = cli("enqueue", "counter")
    assert missing.returncode == 2
    line = _one_line_error(missing.stderr)
    assert "--input" in line and "reflexr-graph enqueue --help" in line
    as_json = cli("enqueue", "counter", "--json")
    problem = json.loads(_one_line_error(as_json.stderr))["error"]
    assert (problem["type"], problem["exit_code"]) == ("UsageError", 2)
    typo = cli("enqeue", "counter")
    assert typo.returncode == 2 and "Did you mean 'enqueue'" in _one_line_error(typo.stderr)


@pytest.mark.usefixtures("published")
def test_invalid_inputs_are_one_line_and_listed_in_json(cli: Cli) -> None:
    result = cli("enqueue", "counter", "--input", '{"key": "", "n": -1}', "--json")
    assert result.returncode == 2
    problem = json.loads(_one_line_error(result.stderr))["error"]
    assert problem["type"] == "InvalidInputs"
    assert [e["loc"] for e in problem["errors"]] == [["inputs", "key"], ["inputs", "n"]]


def test_an_unexpected_error_is_one_line_unless_debug(cli: Cli, redis_client: redis.Redis) -> None:
    """A schema entry that does not parse (written by some other version) is a bug to report,
    not a traceback to read: type and a summary, exit 1; --debug prints the traceback."""
    redis_client.hset(schemas.GRAPHS, "broken", '{"name": "private-value-in-entry"}')
    result = cli("graphs")
    assert result.returncode == 1
    line = _one_line_error(result.stderr)
    assert line.startswith("error: unexpected ValidationError") and "--debug" in line
    assert "private-value-in-entry" not in result.stderr
    debug = cli("--debug", "graphs")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_no_answer_to_a_question_says_to_pass_yes(cli: Cli, client: Client) -> None:
    run_id = client.enqueue("counter", {"key": "a", "n": 1})
    result = cli("cancel", run_id, stdin="")  # stdin closed before the question is answered
    assert result.returncode == 1
    assert "pass --yes" in _one_line_error(result.stderr)
    assert client.get(run_id).status == "queued"
