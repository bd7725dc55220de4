"""What the demo says once its workers are stopped: how to look at the runs it left in Redis."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from reflexr_graph.demo.scenario import RunSpec


@dataclass(frozen=True)
class Target:
    """The Redis the demo ran on: its private one (with the pid it was left running as), or the user's."""

    url: str
    private: bool
    kept_pid: int | None = None


def cli_command() -> str:
    """How to call this reflexr-graph from the current directory: its name if PATH finds it, else its path."""
    script = Path(sys.executable).parent / "reflexr-graph"
    found = shutil.which("reflexr-graph")
    if found is not None and Path(found).resolve() == script.resolve():
        return "reflexr-graph"
    if not script.exists():
        return f"{sys.executable} -m reflexr_graph"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def inspect_commands(target: Target, specs: list[RunSpec]) -> list[tuple[str, str]]:
    """(command, what it shows) to look at the demo's runs in the target Redis.

    A Redis of the user's is already named by their REFLEXR_REDIS_URL: its URL, which may
    hold a password, is not echoed.
    """
    cli = cli_command()
    ids = {s.role: s.run_id for s in specs if s.run_id}
    commands = (
        [(f"export REFLEXR_REDIS_URL={target.url}", "every command below reads it")] if target.private else []
    )
    commands.append((f"{cli} runs", "the runs"))
    if "crash" in ids:
        commands.append((f"{cli} history {ids['crash']}", "crash-me: the SIGKILL and the resume"))
    if "poison" in ids:
        commands.append((f"{cli} history {ids['poison']}", "poison: failed attempts, dead letter, replay"))
        commands.append((f"{cli} status {ids['poison']}", "poison now: attempts, checkpoints, output"))
    commands.append((f"{cli} dlq list", "dead-lettered runs (none left once poison was replayed)"))
    return commands


def tell(console: Console, target: Target, specs: list[RunSpec]) -> None:
    """Print how to look at the runs, and how to stop a Redis left running; or how to ask for that."""
    if target.private and target.kept_pid is None:
        console.print(
            f"[bold cyan]>[/] the demo's Redis stops with it; to look at the runs afterwards, run "
            f"[bold]{escape(cli_command())} demo --keep[/], which leaves that Redis running and says how"
        )
        return
    if target.private:
        where = (
            f"left the demo's Redis running at {target.url} "
            f"(redis-server pid {target.kept_pid}; the workers are stopped)"
        )
    else:
        where = f"the runs stay in your Redis at {target.url.split('@')[-1]}"
    console.print(f"[bold cyan]>[/] {escape(where)}. To look at them:")
    commands = inspect_commands(target, specs)
    width = max(len(c) for c, _ in commands)
    for command, what in commands:
        console.print(f"    {escape(command.ljust(width))}  [dim]# {escape(what)}[/]", soft_wrap=True)
    if target.kept_pid:
        console.print(
            f"  then stop that Redis: [bold]kill {target.kept_pid}[/] "
            "(the next demo refuses to start while it runs)"
        )
