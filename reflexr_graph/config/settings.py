"""Fleet settings, read from ``REFLEXR_*`` environment variables.

A typo in a variable name would otherwise be ignored silently and the default used, so
an unknown ``REFLEXR_*`` variable is an error that names it and lists the known ones.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Self
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from reflexr_graph.core import invalid
from reflexr_graph.core.inflight import DEFAULT_SIBLING_GRACE_S
from reflexr_graph.core.policy import DEFAULT_MAX_ATTEMPTS
from reflexr_graph.errors import SettingsError
from reflexr_graph.store import cluster, payload_store, sentinel, url_check
from reflexr_graph.store.payload_keys import KeyRing

ENV_PREFIX = "REFLEXR_"
BROKER_REDIS_SCHEMES = ("redis", "rediss", "redis+sentinel")
REDIS_SCHEMES = (*BROKER_REDIS_SCHEMES, *cluster.SCHEMES)
BROKER_SCHEMES = (*BROKER_REDIS_SCHEMES, "amqp", "amqps")
LEASE_TO_VISIBILITY_FACTOR = 4
"""The lease TTL may be at most this fraction of the visibility timeout (see the validator)."""

DAY_S = 24 * 3600
MIB = 1024 * 1024

log = logging.getLogger(__name__)


class Settings(BaseSettings):
    """Everything a worker, the reaper and the clients read from the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    redis_url: str = Field("redis://127.0.0.1:6379/0", repr=False)
    broker_url: str = Field("", repr=False)
    """The Celery broker; '' for the store's Redis (``redis_url``). ``amqp://`` for RabbitMQ: the
    store, leases and checkpoints stay in Redis (docs/design.md#rabbitmq-as-the-broker)."""
    graphs: Annotated[tuple[str, ...], NoDecode] = ()
    queue: str = Field("reflexr", min_length=1)
    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1)
    """The attempt budget a process publishes for each graph whose action sets none
    (``schemas.run_max_attempts``): the workers' setting decides, not a producer's."""
    max_interruptions: int = Field(20, ge=1)
    """Attempts cut short by the fleet (soft shutdown, Redis unreachable) before a run is dead."""
    retry_backoff_s: float = Field(2.0, gt=0)
    retry_backoff_max_s: float = Field(300.0, gt=0)
    lease_ttl_s: float = Field(30.0, gt=0)
    visibility_timeout_s: float = Field(3600.0, gt=0)
    run_retention_s: int = Field(7 * DAY_S, gt=0)
    dead_retention_s: int = Field(30 * DAY_S, gt=0)
    soft_shutdown_timeout_s: float = Field(10.0, ge=0)
    sibling_grace_s: float = Field(DEFAULT_SIBLING_GRACE_S, ge=0)
    """When a step fails, or a cancel stops the attempt, how long the steps still in flight (a
    fork's other branches) may run on to finish and record their results; 0 cancels them at once."""
    dispatch_grace_s: float = Field(30.0, gt=0)
    """How long a run a client records (enqueue, signal, fork) may wait for its message to be taken
    before a worker's reaper sends it again: for a client that died before sending it, and for a
    graph no live worker serves, whose run is then seen waiting for one."""
    client_retry_s: float = Field(15.0, ge=0)
    """How long a client (Client, AsyncClient, the CLI, the API) retries a Redis that is unavailable
    (a Sentinel or cluster failover, a restart) before it raises StoreUnavailable; 0 never retries."""
    unknown_graph_grace_s: float = Field(300.0, ge=0)
    """How long a run waits for a live worker that serves its graph before it is dead-lettered."""
    version_grace_s: float = Field(60.0, ge=0)
    """How long a run is looked at again for a live worker of its graph version before it waits for
    one (``waiting_for = version:<v>``): longer than a deploy's restart, so a restart does not flap it."""
    checkpoint_history: int = Field(100, ge=0)
    """How many checkpoints before the latest a run keeps, for time travel; 0 keeps only the latest."""
    stream_max_items: int = Field(10_000, ge=1)
    """The most items a run's stream may hold (``reflexr_graph.emit``); past it, emit raises StreamFull."""
    max_payload_bytes: int = Field(2 * MIB, ge=1024)
    """The largest inputs (and, separately, state) a run may be enqueued with, as JSON."""
    payload_keys: str = Field("", repr=False)
    """``id:base64key[,id2:key2]``: AES-256-GCM keys that encrypt every payload at rest; the first
    encrypts, all decrypt (store/payload_keys.py). '' keeps payloads unencrypted."""
    payload_store: str = ""
    """``file:///dir`` or ``s3://bucket/prefix``: where payloads over ``offload_bytes`` are kept,
    content-addressed, with a reference in Redis (store/payload_store.py). '' keeps every payload
    in Redis."""
    offload_bytes: int = Field(64 * 1024, ge=1)
    """Payloads larger than this (bytes of JSON) go to the payload store, when one is set."""
    max_offload_bytes: int = Field(1024 * MIB, ge=1024)
    """The largest single payload with a payload store (``max_payload_bytes`` without one)."""
    health_file: str = ""
    """A worker touches this file every reaper tick; `reflexr-graph health` checks its age."""
    api_token: str = Field("", repr=False)
    """The bearer token every ``/api`` route of ``reflexr-graph serve`` requires, at least 32
    characters (``serve`` refuses a shorter one); '' and ``serve`` generates one at start."""
    api_tokens: str = ""
    """A file of named API tokens, one ``name role token-sha256-hex`` line each (roles ``viewer``,
    ``operator``, ``admin``; ``#`` comments allowed): ``reflexr-graph token new NAME ROLE`` prints
    a line and its token. Read once, when ``serve`` starts; REFLEXR_API_TOKEN works beside them."""
    api_max_body: int = Field(5 * MIB, ge=1024)
    """The largest request body the HTTP API accepts, in bytes (inputs and state, each up to
    ``max_payload_bytes``, with room to spare)."""
    api_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """The Host values ``serve`` answers besides its bound address (``name`` or ``name:port``,
    comma separated): the names a proxy or a browser reaches it by. Any other is refused (400), so
    a page on another site that rebinds its own name to this address reads nothing."""
    max_streams: int = Field(200, ge=1)
    """The most event streams (SSE) one ``serve`` holds open at once; past it a stream gets 429
    with ``Retry-After``. They have a Redis pool of their own, so the other routes keep theirs."""

    @field_validator("graphs", mode="before")
    @classmethod
    def _split_graphs(cls, value: Any) -> Any:
        # The environment gives one comma-separated string; code may pass a list.
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("api_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip().lower() for part in value.split(",") if part.strip())
        return value

    @field_validator("api_hosts")
    @classmethod
    def _check_hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for host in value:
            if not host or any(c in host for c in "/@?# \t"):
                raise ValueError("each must be a host name, optionally with :port (api.example.com:443)")
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str) -> str:
        scheme = _scheme(value)
        if scheme not in REDIS_SCHEMES:
            # The URL may hold a password, so only its scheme is echoed.
            raise ValueError(
                f"must start with one of {', '.join(s + '://' for s in REDIS_SCHEMES)} "
                f"(got scheme {scheme!r}), e.g. redis://:password@host:6379/0"
            )
        if scheme == sentinel.SCHEME:
            sentinel.parse(value)  # its SentinelURLError says what to fix, without the password
        if scheme in cluster.SCHEMES:
            cluster.parse(value)
        return value

    @field_validator("broker_url")
    @classmethod
    def _check_broker_url(cls, value: str) -> str:
        scheme = _scheme(value)
        if scheme in cluster.SCHEMES:
            raise ValueError(
                "cannot be a Redis Cluster (kombu has no cluster transport): name a standalone Redis, "
                "a Sentinel-managed Redis or RabbitMQ, e.g. redis://broker:6379/0"
            )
        if value and scheme not in BROKER_SCHEMES:
            raise ValueError(
                f"must be empty (the broker is then REFLEXR_REDIS_URL) or start with one of "
                f"{', '.join(s + '://' for s in BROKER_SCHEMES)} (got scheme {scheme!r}), "
                "e.g. amqp://user:password@rabbitmq:5672/vhost"
            )
        if scheme == sentinel.SCHEME:
            sentinel.parse(value)
        return value

    @field_validator("payload_keys")
    @classmethod
    def _check_payload_keys(cls, value: str) -> str:
        KeyRing.parse(value)  # its SettingsError says what to fix, never echoing a key
        return value

    @field_validator("payload_store")
    @classmethod
    def _check_payload_store(cls, value: str) -> str:
        if value:
            payload_store.parse(value)
        return value

    @model_validator(mode="after")
    def _check_relations(self) -> Self:
        if self.lease_ttl_s * LEASE_TO_VISIBILITY_FACTOR > self.visibility_timeout_s:
            # A worker that dies must be recovered by its lease lapsing, long before the
            # broker redelivers its message; and a long step must never outlive the
            # visibility timeout by less than a few lease renewals.
            raise ValueError(
                f"lease_ttl_s ({self.lease_ttl_s:g}) must be well below visibility_timeout_s "
                f"({self.visibility_timeout_s:g}): at most 1/{LEASE_TO_VISIBILITY_FACTOR} of it; "
                f"lower {ENV_PREFIX}LEASE_TTL_S or raise {ENV_PREFIX}VISIBILITY_TIMEOUT_S"
            )
        if cluster.is_cluster_url(self.redis_url) and not self.broker_url:
            raise ValueError(
                f"{ENV_PREFIX}REDIS_URL names a Redis Cluster, which cannot carry the Celery messages: "
                f"set {ENV_PREFIX}BROKER_URL to a standalone Redis, a Sentinel-managed Redis or RabbitMQ"
            )
        if self.retry_backoff_max_s < self.retry_backoff_s:
            raise ValueError(
                f"retry_backoff_max_s ({self.retry_backoff_max_s:g}) must be at least retry_backoff_s "
                f"({self.retry_backoff_s:g}); raise {ENV_PREFIX}RETRY_BACKOFF_MAX_S"
            )
        return self

    @property
    def broker(self) -> str:
        """The broker's URL: ``broker_url``, or the store's Redis when it is empty."""
        return self.broker_url or self.redis_url

    @property
    def broker_is_store(self) -> bool:
        """True when the broker is the store's own Redis (the client's LPUSH fast path)."""
        # A cluster store's broker is always apart (kombu has no cluster transport).
        return self.broker == self.redis_url and not cluster.is_cluster_url(self.redis_url)

    @property
    def payload_limit(self) -> int:
        """The largest single payload (inputs, state) a run may be given, as JSON bytes."""
        return self.max_offload_bytes if self.payload_store else self.max_payload_bytes

    @property
    def lease_ttl_ms(self) -> int:
        return int(self.lease_ttl_s * 1000)

    @property
    def dispatch_grace_ms(self) -> int:
        return int(self.dispatch_grace_s * 1000)


def _scheme(url: str) -> str:
    """The scheme of ``url``; ValueError when it does not parse, saying why without quoting it
    (store/url_check.py)."""
    found = url_check.problem(url)
    if found is not None:
        raise ValueError(found)
    return urlsplit(url).scheme


def known_env_vars() -> list[str]:
    """Every environment variable the settings read, e.g. ``REFLEXR_REDIS_URL``."""
    return sorted(ENV_PREFIX + name.upper() for name in Settings.model_fields)


def check_environment(environ: Mapping[str, str]) -> None:
    """Raise SettingsError for a ``REFLEXR_*`` variable that is not a known setting."""
    known = set(known_env_vars())
    unknown = sorted(k for k in environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in known)
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), known, n=1)
        if close:
            hints.append(f"{name} -> {close[0]}?")
    hint = f" (did you mean: {', '.join(hints)})" if hints else ""
    raise SettingsError(
        f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}{hint}: "
        f"remove or rename {'them' if len(unknown) > 1 else 'it'}; the known settings are "
        f"{', '.join(sorted(known))}"
    )


def describe_validation_error(exc: ValidationError) -> str:
    """One line per invalid setting, named as its environment variable, without its value."""
    return "invalid settings: " + invalid.describe(exc, where=_env_name)


def _env_name(loc: Sequence[object]) -> str:
    """The environment variable of a setting's location; none for the model's own checks."""
    return f"{ENV_PREFIX}{str(loc[0]).upper()}" if loc else ""


def load_settings(*, strict: bool = True, **overrides: Any) -> Settings:
    """Settings from the environment (``overrides`` win), or SettingsError saying what to fix.

    ``strict=False`` (clients) only warns about an unknown ``REFLEXR_*`` variable: a producer
    deployed with an older build than the workers must not refuse to start over a setting it
    does not know yet. Workers stay strict, where a typo would silently run with a default.
    """
    try:
        check_environment(os.environ)
    except SettingsError as exc:
        if strict:
            raise
        log.warning("%s; this client goes on without them", exc)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc)) from None
