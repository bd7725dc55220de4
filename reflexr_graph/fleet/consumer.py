"""The fleet's Celery consumer: a message Celery rejects goes to the quarantine list, not away.

Celery's consumer acks and forgets a message whose body it cannot decode, whose content type
it refuses (pickle), that names no task or a task it does not know, and it logs the body
while doing so (inputs may be private). Here each of those is moved aside with a reason
(fleet/quarantine.py), logged once without its content, and acked; the worker carries on.

Unknown tasks are quarantined only on the fleet's own queues (``REFLEXR_QUEUE`` and the
``REFLEXR_QUEUE.<name>`` queues under it); on any other queue Celery's handling stays.
Anything else the task handler raises for a message, short of a broker error, would stop the
worker; it moves the message aside instead (``handler_error``).

Selected with Celery's ``worker_consumer`` setting by the fleet's app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from celery.exceptions import InvalidTaskError
from celery.worker.consumer.consumer import Consumer
from kombu.exceptions import ContentDisallowed
from vine import promise

from reflexr_graph.fleet.quarantine import QuarantineReason, move_message_aside, queue_of

log = logging.getLogger(__name__)


def _refused_content(exc: BaseException) -> bool:
    """True for a body kombu refused to deserialize (a content type not accepted), not a broken one."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, ContentDisallowed):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


DELAYED_DELIVERY_STEP = "celery.worker.consumer.delayed_delivery:DelayedDelivery"
GOSSIP_STEP = "celery.worker.consumer.gossip:Gossip"
LEFT_OUT_STEPS = (DELAYED_DELIVERY_STEP, GOSSIP_STEP)
"""Consumer steps the fleet does not run.

Celery's native delayed delivery (for ETA tasks on quorum queues) declares a dozen exchanges and
warns about every direct one; the fleet sends no ETA or countdown (retries wait in the store's due
set), so the step only costs startup time. Gossip follows the other workers' events (clock sync,
leader election), which the fleet does not use: its registry of live workers is fleet/presence.py.
On a lost broker connection Celery also stops Gossip after clearing the consumer's connection, so
every Redis outage logged an AttributeError traceback ('NoneType' object has no attribute
'connection_errors') where ``--without-gossip`` was not given."""


class FleetConsumer(Consumer):
    class Blueprint(Consumer.Blueprint):  # type: ignore[misc,valid-type]  # not in celery-types
        default_steps: ClassVar[list[str]] = [
            s for s in Consumer.Blueprint.default_steps if s not in LEFT_OUT_STEPS
        ]

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        if _refused_content(exc):
            # On RabbitMQ a pickle's refusal comes here (kombu decodes the body on delivery);
            # the Redis transport's envelope check reports the same message earlier.
            self.on_invalid_task(None, message, ContentDisallowed(str(exc)))
            return
        move_message_aside(
            message,
            QuarantineReason.UNDECODABLE_BODY,
            f"Celery could not decode its body ({type(exc).__name__})",
            app=self.app,
        )

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        if isinstance(exc, ContentDisallowed):
            reason, detail = (
                QuarantineReason.CONTENT_NOT_ALLOWED,
                "its content type is not JSON; never deserialized",
            )
        else:
            what = (
                "rejected it" if isinstance(exc, InvalidTaskError) else f"rejected it ({type(exc).__name__})"
            )
            reason, detail = (
                QuarantineReason.INVALID_TASK,
                f"Celery {what}: a header has the wrong type or value",
            )
        move_message_aside(message, reason, detail, app=self.app)

    def on_unknown_message(self, body: Any, message: Any) -> None:
        move_message_aside(
            message, QuarantineReason.NOT_A_TASK, "it names no task in its headers or body", app=self.app
        )

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        if not self._ours(queue_of(message)):
            super().on_unknown_task(body, message, exc)
            return
        move_message_aside(
            message, QuarantineReason.UNKNOWN_TASK, "this worker has no task of that name", app=self.app
        )

    def _ours(self, queue: str) -> bool:
        settings = getattr(self.app, "reflexr_settings", None)
        if settings is None:
            return True
        return queue == settings.queue or queue.startswith(settings.queue + ".")

    def create_task_handler(self, promise: type[promise] = promise) -> Callable[..., Any]:
        handler = super().create_task_handler(promise)
        connection_errors: tuple[type[BaseException], ...] = tuple(getattr(self, "connection_errors", ()))

        def on_task_received(message: Any) -> Any:
            try:
                return handler(message)
            except connection_errors:
                raise  # the consumer reconnects; the unacked message is restored
            except Exception as exc:
                # A message nothing above foresaw, or quarantining it failed: Celery would stop
                # the worker here.
                return self._last_resort(message, exc, connection_errors)

        return on_task_received

    def _last_resort(
        self, message: Any, exc: Exception, connection_errors: tuple[type[BaseException], ...]
    ) -> None:
        log.debug("handling a message raised %s", type(exc).__name__, exc_info=True)
        try:
            move_message_aside(
                message,
                QuarantineReason.HANDLER_ERROR,
                f"handling it raised {type(exc).__name__}",
                app=self.app,
            )
            return
        except connection_errors:
            raise
        except Exception as again:  # Redis refusing writes (out of memory), say
            failure = again
        queue = queue_of(message)
        try:
            # Left unacked it would hold the consumer's only prefetch slot: nothing else would run.
            if not message.acknowledged:
                message.reject(requeue=True)
        except connection_errors:
            raise
        except Exception:
            log.error(
                "a message from queue %r could be neither handled (%s), moved aside (%s) nor requeued; "
                "kombu restores it after the visibility timeout; the worker carries on",
                queue,
                type(exc).__name__,
                type(failure).__name__,
            )
            return
        log.error(
            "a message from queue %r could be neither handled (%s) nor moved aside (%s); requeued at the "
            "back of its queue, and the worker carries on",
            queue,
            type(exc).__name__,
            type(failure).__name__,
        )
