"""No secret in any message: a Redis or broker URL whose password holds '/', '#' and '?' (unencoded)
goes through every CLI command's error path, and the password is in nothing the CLI prints."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main

from reflexr_graph.cli import app
from reflexr_graph.config.settings import Settings
from tests.surfaces.cli_runner import run_cli

SECRET = "s3cr3tPW"
PASSWORDS = [f"{SECRET}/a#b?c", f"{SECRET}#a/b?c", f"{SECRET}?a#b/c"]


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    # typer's own click: a group is what has commands.
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


VALUES = {"seq": "1", "from_seq": "1", "input_": "{}", "refs": "tests.fleet.graphs:steps"}
"""A value for each required parameter whose name needs one of a type; any other gets 'x1'."""


def _argv(path: tuple[str, ...], command: Any) -> list[str]:
    """The command with its required parameters, so it gets as far as its first use of the URL."""
    argv = list(path)
    for param in command.params:
        if param.required:
            value = VALUES.get(param.name, "x1")
            argv += [param.opts[0], value] if param.param_type_name == "option" else [value]
    return argv


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_every_command_is_swept() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"runs", "status", "history", "enqueue", "rekey", "serve", "dlq list", "worker"} <= names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_a_password_with_slash_hash_and_query_is_in_no_output(
    path: tuple[str, ...], command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _argv(path, command)
    for password in PASSWORDS:
        url = f"redis://:{password}@127.0.0.1:6390/0"
        for env, flag in (
            ({"REFLEXR_REDIS_URL": url}, []),
            ({}, ["--redis-url", url]),
            ({"REFLEXR_BROKER_URL": url}, []),
        ):
            done = run_cli([*flag, *argv], env, monkeypatch)
            said = done.stdout + done.stderr
            assert SECRET not in said, (argv, said)
            assert done.returncode != 0 or not flag, (argv, said)


def test_the_settings_never_show_a_secret() -> None:
    settings = Settings(
        redis_url=f"redis://:{SECRET}@h:6379/0",
        broker_url=f"amqp://u:{SECRET}@h:5672/v",
        api_token=SECRET * 4,
        payload_keys="k1:" + "A" * 43 + "=",
    )
    assert SECRET not in repr(settings) and SECRET not in str(settings)


def test_the_error_names_the_setting_not_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"redis://:{PASSWORDS[0]}@127.0.0.1:6390/0"
    for env, named in (
        ({"REFLEXR_REDIS_URL": url}, "REFLEXR_REDIS_URL"),
        ({"REFLEXR_BROKER_URL": url}, "REFLEXR_BROKER_URL"),
    ):
        done = run_cli(["runs"], env, monkeypatch)
        assert done.returncode == 2, done.stderr
        assert f"invalid settings: {named}: does not parse" in done.stderr
