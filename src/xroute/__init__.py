"""xroute: AMQP 0-9-1 (RabbitMQ) message routing in Python, exact and fast."""

from xroute.engines import ENGINES, TopicMatcher
from xroute.errors import (
    AccessRefused,
    BindingNotFound,
    DefinitionsError,
    InvalidArguments,
    InvalidHeaders,
    InvalidPattern,
    InvalidRoutingKey,
    PreconditionFailed,
    UnknownEngine,
    UnknownExchange,
    UnknownExchangeType,
    UnknownQueue,
    XRouteError,
)
from xroute.model import Binding, Destination
from xroute.topology import Topology

__version__ = "0.1.0"

__all__ = [
    "ENGINES",
    "AccessRefused",
    "Binding",
    "BindingNotFound",
    "DefinitionsError",
    "Destination",
    "InvalidArguments",
    "InvalidHeaders",
    "InvalidPattern",
    "InvalidRoutingKey",
    "PreconditionFailed",
    "TopicMatcher",
    "Topology",
    "UnknownEngine",
    "UnknownExchange",
    "UnknownExchangeType",
    "UnknownQueue",
    "XRouteError",
]
