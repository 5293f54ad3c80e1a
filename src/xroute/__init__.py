"""xroute: AMQP 0-9-1 (RabbitMQ) message routing in Python, exact and fast."""

from xroute.engines import ENGINES, TopicMatcher
from xroute.errors import (
    AccessRefused,
    BindingNotFound,
    DatasetError,
    DefinitionsError,
    InclusionTooCostly,
    InvalidArguments,
    InvalidHeaders,
    InvalidLintInput,
    InvalidPattern,
    InvalidRoutingKey,
    JavaUnavailable,
    OutputExists,
    PipelineFailed,
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
    "DatasetError",
    "DefinitionsError",
    "Destination",
    "InclusionTooCostly",
    "InvalidArguments",
    "InvalidHeaders",
    "InvalidLintInput",
    "InvalidPattern",
    "InvalidRoutingKey",
    "JavaUnavailable",
    "OutputExists",
    "PipelineFailed",
    "PreconditionFailed",
    "TopicMatcher",
    "Topology",
    "UnknownEngine",
    "UnknownExchange",
    "UnknownExchangeType",
    "UnknownQueue",
    "XRouteError",
]
