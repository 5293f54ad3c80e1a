"""xroute: AMQP 0-9-1 (RabbitMQ) message routing in Python, exact and fast.

The packages (docs/architecture.md): `core` routes, `engines` and `exchanges` are its parts,
`sources` brings topologies and data in, and the edges (`spark`, `pipeline`, `amqp`, `kombu`,
`traces`, `tools`, `bench`, `cli`) call it."""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

from xroute.core.errors import (
    AccessRefused,
    BindingNotFound,
    BrokerCrash,
    DatasetError,
    DefinitionsError,
    FieldTableError,
    InclusionTooCostly,
    InequivalentArgument,
    InvalidArguments,
    InvalidArgumentType,
    InvalidFieldValue,
    InvalidHeaders,
    InvalidLintInput,
    InvalidPattern,
    InvalidRoutingKey,
    JavaUnavailable,
    ManagementAuthFailed,
    ManagementError,
    ManagementTimeout,
    ManagementUnavailable,
    ManagementURLError,
    MissingDependency,
    OtherStreamOutput,
    OutputExists,
    OutputNotOurs,
    OutputOverlapsInput,
    PipelineFailed,
    PreconditionFailed,
    ReplayFailed,
    RoutingFailed,
    SelectorError,
    SparkConnectUnavailable,
    StorageError,
    StreamDisconnected,
    StreamError,
    StreamNotFound,
    StreamTruncated,
    StreamUnreachable,
    StreamURIError,
    StreamVanished,
    TraceFormatError,
    UnknownEngine,
    UnknownExchange,
    UnknownExchangeType,
    UnknownProfile,
    UnknownQueue,
    UnsupportedExchangeType,
    VhostNotFound,
    XRouteError,
)
from xroute.core.model import Binding, Destination
from xroute.core.topology import Topology
from xroute.engines import ENGINES, TopicMatcher

__version__ = "0.1.0"

# Where the modules that once sat at the package root live now (issue 39). Their old paths
# (`xroute.core.topology`, `from xroute import errors`...) still import, as the same module objects.
MOVED_MODULES = {
    **{name: f"xroute.core.{name}" for name in (
        "errors", "model", "keys", "headers", "values", "field_table", "topology",
        "destinations", "route_cache", "literal_routes", "wildcard_queues", "dead_letter",
        "profiles", "batch", "_batch_kernel")},
    **{name: f"xroute.sources.{name}" for name in ("definitions", "management", "storage")},
    "patterns": "xroute.tools.patterns",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``xroute.<old name>`` as the module at its new path, lazily (`_batch_kernel`
    imports numba, which only a batch should pay for)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old path of a moved module; None for any other name."""
        prefix, _, name = fullname.partition(".")
        if prefix == "xroute" and name in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        """The module at its new path, imported there if it was not yet."""
        return importlib.import_module(MOVED_MODULES[spec.name.partition(".")[2]])

    def exec_module(self, module: object) -> None:
        """Nothing: the module ran at its new path."""


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())


__all__ = [
    "ENGINES",
    "AccessRefused",
    "Binding",
    "BindingNotFound",
    "BrokerCrash",
    "DatasetError",
    "DefinitionsError",
    "Destination",
    "FieldTableError",
    "InclusionTooCostly",
    "InequivalentArgument",
    "InvalidArgumentType",
    "InvalidArguments",
    "InvalidFieldValue",
    "InvalidHeaders",
    "InvalidLintInput",
    "InvalidPattern",
    "InvalidRoutingKey",
    "JavaUnavailable",
    "ManagementAuthFailed",
    "ManagementError",
    "ManagementTimeout",
    "ManagementURLError",
    "ManagementUnavailable",
    "MissingDependency",
    "OtherStreamOutput",
    "OutputExists",
    "OutputNotOurs",
    "OutputOverlapsInput",
    "PipelineFailed",
    "PreconditionFailed",
    "ReplayFailed",
    "RoutingFailed",
    "SelectorError",
    "SparkConnectUnavailable",
    "StorageError",
    "StreamDisconnected",
    "StreamError",
    "StreamNotFound",
    "StreamTruncated",
    "StreamURIError",
    "StreamUnreachable",
    "StreamVanished",
    "TopicMatcher",
    "Topology",
    "TraceFormatError",
    "UnknownEngine",
    "UnknownExchange",
    "UnknownExchangeType",
    "UnknownProfile",
    "UnknownQueue",
    "UnsupportedExchangeType",
    "VhostNotFound",
    "XRouteError",
]
