"""Which runs a bulk command acts on (``cancel``, ``purge``, ``dlq replay``, ``dlq purge``): the runs
it names, or with ``--all`` every run its filter (status, graph, dead reason, tags) matches.

The options are declared here once. :func:`selects` puts them in a command's signature in place
of its ``selection`` parameter, as typer reads it, and hands the command one :class:`RunSelection`.
A :class:`Selector` says which of them a command offers and holds the texts that are its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from reflexr_graph.cli.app import GraphOpt, OptionalRunArg, ReasonOpt, RunsArg, TagOpt
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.inputs import parse_tag_options
from reflexr_graph.client.bulk import RunFilter
from reflexr_graph.core.tags import Tags
from reflexr_graph.model import Status


@dataclass(frozen=True)
class Selector:
    """The selection options one command offers, and its own words for them."""

    which: str
    """Which runs --all takes: "Every <which> run"."""
    status_help: str | None = None
    """--status's help; None when the command has no --status."""
    reason: bool = False
    """Whether the command has --reason (why a run died)."""
    one_run: bool = False
    """Whether it names one run (RUN) rather than several (RUN...)."""
    ids: str = "run ids"
    """The runs, as the refusal of both runs and --all names them ("give <ids> or --all")."""
    name_them: str = "the runs (RUN...)"
    """The runs, as the refusal of neither asks for them ("name <name_them> or pass --all")."""

    def filters(self) -> list[tuple[str, str, object]]:
        """The options that narrow --all, as (parameter, option, annotation), in the help's order."""
        status = Annotated[
            Status | None,
            typer.Option("--status", "-s", metavar="STATUS", help=self.status_help),
        ]
        offered = [
            ("status_", "--status", status if self.status_help is not None else None),
            ("graph", "--graph", GraphOpt),
            ("reason", "--reason", ReasonOpt if self.reason else None),
            ("tag", "--tag", TagOpt),
        ]
        return [(name, option, hint) for name, option, hint in offered if hint is not None]

    @property
    def options(self) -> list[str]:
        """The options that narrow --all: ``["--graph", "--reason", "--tag"]``."""
        return [option for _, option, _ in self.filters()]

    @property
    def narrowing(self) -> str:
        """The options that narrow --all, as the texts list them: ``--graph/--reason/--tag``."""
        return "/".join(self.options)

    def parameters(self) -> list[inspect.Parameter]:
        """The command's parameters for the selection, in the help's order."""
        every = Annotated[
            bool, typer.Option("--all", help=f"Every {self.which} run (narrowed by {self.narrowing}).")
        ]
        run = ("run_id", OptionalRunArg) if self.one_run else ("run_ids", RunsArg)
        found = [(*run, None), ("every", every, False)]
        found += [(name, hint, None) for name, _, hint in self.filters()]
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return [
            inspect.Parameter(name, kind, default=default, annotation=hint) for name, hint, default in found
        ]

    def selection(self, values: dict[str, Any]) -> RunSelection:
        """The selection the command line gave, from the values of :meth:`parameters`."""
        if self.one_run:
            run_ids = [] if values["run_id"] is None else [values["run_id"]]
        else:
            run_ids = list(values["run_ids"] or [])
        return RunSelection(
            self,
            run_ids,
            values["every"],
            status=values.get("status_"),
            graph=values["graph"],
            reason=values.get("reason"),
            tag_texts=values["tag"],
        )


@dataclass(frozen=True)
class RunSelection:
    """The runs a command was told to act on: ``run_ids``, or with ``every`` each run the filter
    matches. The ``--tag`` texts are kept as given, and checked when the filter is used."""

    offered: Selector
    run_ids: list[str]
    every: bool
    status: Status | None = None
    graph: str | None = None
    reason: str | None = None
    tag_texts: list[str] | None = None

    def check(self) -> None:
        """Refuse both runs and --all, neither, and a filter given without --all (BadInput, exit 2)."""
        options = self.offered.options
        if self.run_ids and self.every:
            raise BadInput(f"give {self.offered.ids} or --all, not both")
        if not self.run_ids and not self.every:
            raise BadInput(
                f"name {self.offered.name_them} or pass --all (optionally with {self.offered.narrowing})"
            )
        if self.run_ids and (self.status or self.graph or self.reason or self.tag_texts):
            listed = f"{', '.join(options[:-1])} and {options[-1]}"
            raise BadInput(f"{listed} only narrow --all; drop them or use --all")

    @property
    def tags(self) -> Tags:
        """The tags every run must carry; BadInput for a malformed --tag."""
        return parse_tag_options(self.tag_texts)

    def run_filter(self) -> RunFilter:
        """The filter of status, graph and tags (a bulk ``cancel`` or ``purge`` takes)."""
        return RunFilter(self.status, self.graph, self.tags)


def selects(selector: Selector) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the selection options ``selector`` offers, in place of its ``selection``
    parameter, and call it with the :class:`RunSelection` they make."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        if "selection" not in signature.parameters:
            raise TypeError(f"{command.__name__} takes no `selection` parameter to put the options in")
        mine = selector.parameters()
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            params += mine if param.name == "selection" else [param]

        @functools.wraps(command)
        def with_selection(**kwargs: Any) -> None:
            values = {param.name: kwargs.pop(param.name) for param in mine}
            command(**kwargs, selection=selector.selection(values))

        # typer reads a command's parameters through inspect.signature, which takes __signature__
        # first, and their hints from __annotations__ (typing.get_type_hints).
        vars(with_selection)["__signature__"] = signature.replace(parameters=params)
        with_selection.__annotations__ = {
            **{param.name: param.annotation for param in params},
            "return": signature.return_annotation,
        }
        return with_selection

    return decorate
