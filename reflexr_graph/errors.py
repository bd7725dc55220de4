"""One rooted exception tree: every error reflexr-graph raises derives from ReflexrError.

Messages name what is wrong and what to do about it, and never carry the values of
graph state or inputs, which may be private.
"""

from __future__ import annotations


class ReflexrError(Exception):
    """Root of every reflexr-graph error."""


class GraphDefinitionError(ReflexrError, ValueError):
    """A graph or GraphAction cannot be registered as written (bad name, type, input_types...)."""


class SettingsError(ReflexrError, ValueError):
    """A REFLEXR_* setting is missing, unknown or invalid."""


class RunFailure(ReflexrError):
    """Raised by a step to fail the attempt with a stable reason code.

    ``permanent=True`` dead-letters the run at once instead of retrying it.
    """

    def __init__(self, message: str, *, reason: str = "step_failed", permanent: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.permanent = permanent


class OutputNotSerializable(RunFailure):
    """The graph finished, but its output does not read back through the output type."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="output_not_serializable", permanent=True)


class FencedOut(ReflexrError):
    """This attempt no longer owns the run (its token was superseded), so it may write nothing."""


class AttemptCancelled(ReflexrError):
    """The attempt stopped because its lease was lost or the run was cancelled."""


class StoreUnavailable(ReflexrError):
    """Redis could not be reached or used; the attempt fails and is retried.

    ``endpoint`` is ``host:port`` (never credentials) when known; ``kind`` names what went
    wrong (``refused``, ``timeout``, ``auth``, ``db_index``, ``tls_mismatch``...), so callers
    can act on it without parsing the message.
    """

    def __init__(self, message: str, *, endpoint: str = "", kind: str = "unavailable") -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.kind = kind


class RedisMisconfigured(StoreUnavailable):
    """Redis answered, but the URL or the server's setup is wrong: a password, the database
    number, TLS, or not a Redis server at all. Retrying does not help until that is fixed."""


class RunNotFound(ReflexrError, LookupError):
    """No run has this id (it never existed, or its retention has passed)."""


class UnknownGraph(ReflexrError, LookupError):
    """No worker has published a graph with this name."""


class InvalidInputs(ReflexrError, ValueError):
    """The inputs or state do not validate against the graph's schema."""

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class OperationRefused(ReflexrError):
    """The run is not in a status that allows this operation (replay of a running run, ...)."""


class WaitTimeout(ReflexrError, TimeoutError):
    """The run did not reach a terminal status within the timeout."""
