"""AMQP reply codes, and the error that carries one to the client.

Which codes close the channel ("soft") and which close the connection ("hard") is AMQP 0-9-1's
table, as RabbitMQ's ``rabbit_framing_amqp_0_9_1:lookup_amqp_exception`` applies it.
"""

from __future__ import annotations

from xroute.core.errors import XRouteError

# Reply codes by RabbitMQ's names for them.
REPLY_SUCCESS = 200
CONTENT_TOO_LARGE = 311
NO_ROUTE = 312
NO_CONSUMERS = 313
CONNECTION_FORCED = 320
INVALID_PATH = 402
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
FRAME_ERROR = 501
SYNTAX_ERROR = 502
COMMAND_INVALID = 503
CHANNEL_ERROR = 504
UNEXPECTED_FRAME = 505
RESOURCE_ERROR = 506
NOT_ALLOWED = 530
NOT_IMPLEMENTED = 540
INTERNAL_ERROR = 541

REPLY_NAMES = {
    CONTENT_TOO_LARGE: "CONTENT_TOO_LARGE",
    NO_ROUTE: "NO_ROUTE",
    NO_CONSUMERS: "NO_CONSUMERS",
    CONNECTION_FORCED: "CONNECTION_FORCED",
    INVALID_PATH: "INVALID_PATH",
    ACCESS_REFUSED: "ACCESS_REFUSED",
    NOT_FOUND: "NOT_FOUND",
    RESOURCE_LOCKED: "RESOURCE_LOCKED",
    PRECONDITION_FAILED: "PRECONDITION_FAILED",
    FRAME_ERROR: "FRAME_ERROR",
    SYNTAX_ERROR: "SYNTAX_ERROR",
    COMMAND_INVALID: "COMMAND_INVALID",
    CHANNEL_ERROR: "CHANNEL_ERROR",
    UNEXPECTED_FRAME: "UNEXPECTED_FRAME",
    RESOURCE_ERROR: "RESOURCE_ERROR",
    NOT_ALLOWED: "NOT_ALLOWED",
    NOT_IMPLEMENTED: "NOT_IMPLEMENTED",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}
# The codes that close the whole connection; every other code closes only the channel.
HARD_ERRORS = frozenset(code for code in REPLY_NAMES if code >= 500 or code in (320, 402))


# The method a close names (class id, method id): none, or basic.publish (content frames).
NO_METHOD = (0, 0)
PUBLISH_METHOD = (60, 40)


class AMQPError(XRouteError):
    """A protocol error the broker sends to a client: ``code`` and ``text`` as RabbitMQ words
    them; ``hard`` when it closes the connection rather than the channel. ``where`` is the
    method the close names; None: the method being run when it was raised."""

    def __init__(self, code: int, text: str, where: tuple[int, int] | None = None) -> None:
        name = REPLY_NAMES.get(code, str(code))
        full = f"{name} - {text}" if text else name  # RabbitMQ's 541 says its name alone
        super().__init__(full)
        self.code = code
        self.text = full
        self.hard = code in HARD_ERRORS
        self.where = where
        self.class_id, self.method_id = where or NO_METHOD
        self.is_fatal = False

    def fatal(self) -> AMQPError:
        """Mark this error as one after which nothing the client sends can be trusted (a
        frame error): reading stops once the close is sent. Returns the error."""
        self.is_fatal = True
        return self


def not_found(kind: str, name: str, vhost: str) -> AMQPError:
    """RabbitMQ's 404 for a missing queue or exchange."""
    return AMQPError(NOT_FOUND, f"no {kind} '{name}' in vhost '{vhost}'")


def locked(name: str, vhost: str) -> AMQPError:
    """RabbitMQ's 405 for a queue another connection declared exclusive."""
    return AMQPError(
        RESOURCE_LOCKED,
        f"cannot obtain exclusive access to locked queue '{name}' in vhost '{vhost}'. It could "
        "be originally declared on another connection or the exclusive property value does not "
        "match that of the original declaration.",
    )
