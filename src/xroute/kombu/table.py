"""kombu binding tables routed by xroute: one built `Topology` per exchange, kept while the
table is unchanged.

kombu's virtual transports keep an exchange's bindings as a table of rows
``(routing_key, pattern, queue)`` and hand the whole table to the exchange type on every
publish; the Redis transport even reads it afresh from a Redis set each time. Building a
matcher per message would cost more than kombu's own scan, so `TableRouter` keeps the
`Topology` it built for each exchange with a snapshot of the rows it was built from, and
rebuilds only when the rows differ: a binding added or removed by another process shows at
the next publish, as it does in kombu.

Values are py-amqp's (`xroute.core.values.PY_AMQP`): a ``bytes`` header or argument is a longstr,
as py-amqp sends it to RabbitMQ, where xroute's core reads plain ``bytes`` as pika's binary.

This module is pure (no kombu import, no I/O): it sees rows, keys and headers only.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xroute.core.errors import InvalidArguments, XRouteError
from xroute.core.topology import Topology
from xroute.core.values import PY_AMQP, TYPE_CLASSES, TypedValue, as_sent_by
from xroute.engines import DEFAULT_ENGINE
from xroute.exchanges.headers import criteria

# The exchange's name inside each private Topology: kombu's own name might be one the
# Topology reserves (``amq.topic``), and the name never reaches the caller.
EXCHANGE = "kombu"
# Headers bindings carry their arguments in the table's ``pattern`` field, which the Redis
# transport stores as text: the prefix marks the encoding, and its version.
ARGUMENTS_PREFIX = "xroute-args-v1:"
# Exchanges whose built topology is kept per router (one router per channel and type).
# A process rarely publishes to more; past it the oldest entry goes.
MAX_TABLES = 256
# The headers that matter to routing on a non-headers exchange: only the sender-selected keys.
SENDER_SELECTED = ("CC", "BCC")


# ----------------------------------------------------------------- headers binding arguments


def _tagged(value: Any, name: str) -> list:
    # Each value keeps its AMQP type: JSON alone would merge 1 with 1.0 and str with bytes.
    kind = type(value)
    if value is None:
        return ["void"]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        return ["int", value]
    if kind is float:
        return ["float", value.hex() if math.isfinite(value) else repr(value)]
    if kind is str:
        return ["str", value]
    if kind is bytes or kind is bytearray:
        return ["bytes", base64.b64encode(bytes(value)).decode("ascii")]
    if kind is list or kind is tuple:
        return ["array", [_tagged(item, name) for item in value]]
    if isinstance(value, Mapping):
        # In field order: nested tables compare in field order (docs/semantics.md).
        return ["table", [[str(k), _tagged(v, str(k))] for k, v in value.items()]]
    if isinstance(value, TypedValue):  # xroute.core.values: the AMQP type is kept by its name
        if isinstance(value, bytes):
            payload: Any = base64.b64encode(bytes(value)).decode("ascii")
        elif isinstance(value, float):
            payload = float(value).hex()
        else:
            payload = int(value)
        return ["typed", value.amqp_type, payload]
    raise InvalidArguments(
        f"headers binding argument {name!r}: a value of type {kind.__name__} ({value!r:.40}) "
        "cannot be carried in an AMQP table; use str, bytes, int, float, bool, None, list or dict",
        {name: value},
    )


def _untagged(tagged: Any) -> Any:
    tag, *rest = tagged
    if tag == "void":
        return None
    if tag in ("bool", "int", "str"):
        return rest[0]
    if tag == "float":
        text = rest[0]
        return float.fromhex(text) if text.startswith(("0x", "-0x")) else float(text)
    if tag == "bytes":
        return base64.b64decode(rest[0])
    if tag == "array":
        return [_untagged(item) for item in rest[0]]
    if tag == "table":
        return {name: _untagged(value) for name, value in rest[0]}
    if tag == "typed":
        kind, payload = rest
        cls = TYPE_CLASSES[kind]
        if issubclass(cls, bytes):
            return cls(base64.b64decode(payload))
        return cls(float.fromhex(payload) if issubclass(cls, float) else payload)
    raise ValueError(f"unknown tag {tag!r}")


def encode_table(arguments: Mapping[str, Any] | None) -> str:
    """An AMQP table (binding or exchange arguments) as typed text that `decode_table` reads
    back with every value's type. The same table always gives the same text (top-level names
    sorted; a nested table keeps its field order, which its equality depends on). A value an
    AMQP table cannot carry raises `InvalidArguments`."""
    arguments = dict(arguments or {})
    for name in arguments:
        if not isinstance(name, str):
            raise InvalidArguments(f"argument name {name!r} is not text", arguments)
    body = [[name, _tagged(value, name)] for name, value in sorted(arguments.items())]
    return ARGUMENTS_PREFIX + json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def decode_table(text: Any) -> dict[str, Any]:
    """The table that `encode_table` wrote; `InvalidArguments` for any other text."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str) or not text.startswith(ARGUMENTS_PREFIX):
        raise InvalidArguments(
            f"found {text!r:.60} where xroute's encoded arguments (a headers binding row's, an "
            f"exchange's) were expected (text beginning {ARGUMENTS_PREFIX!r}); was it written "
            "without xroute.kombu installed?",
            text,
        )
    try:
        body = json.loads(text[len(ARGUMENTS_PREFIX):])
        # kombu's values are py-amqp's: bytes written before typed values were kept are
        # longstr (`as_sent_by`).
        return as_sent_by({name: _untagged(value) for name, value in body}, PY_AMQP)
    except (ValueError, TypeError, IndexError, KeyError, XRouteError) as error:
        raise InvalidArguments(
            f"cannot decode xroute's encoded arguments {text!r:.60}: {error}", text
        ) from None


def encode_arguments(arguments: Mapping[str, Any] | None) -> str:
    """A headers binding's arguments as the text kept in a kombu table row's ``pattern``
    (`encode_table`: kombu finds the row to remove by building it again, so equal arguments
    must give equal text). Refuses a bad ``x-match`` or a value an AMQP table cannot carry
    with `InvalidArguments`, at bind time, as RabbitMQ does."""
    arguments = as_sent_by(dict(arguments or {}), PY_AMQP)  # kombu's values are py-amqp's
    text = encode_table(arguments)
    criteria(arguments)  # validates x-match
    return text


#: The arguments that `encode_arguments` wrote (`decode_table`).
decode_arguments = decode_table


# ----------------------------------------------------------------- the router


@dataclass
class _Built:
    rows: list  # the rows the topology was built from, in the order seen
    topology: Topology
    row_set: frozenset | None = field(default=None)  # made on the first reordered table


@dataclass
class RouterStats:
    """How often a publish found its exchange's topology current (``hits``), rebuilt it
    (``builds``), or found the same rows in another order (``reorders``, also no rebuild)."""

    hits: int = 0
    builds: int = 0
    reorders: int = 0


class TableRouter:
    """Routes messages over kombu binding tables of one exchange type, with xroute's rules.

    One router serves every exchange of its type on a channel; each exchange's `Topology` is
    built from its table once and kept until the table's rows change.
    """

    def __init__(
        self, exchange_type: str, engine: str = DEFAULT_ENGINE, max_tables: int = MAX_TABLES
    ) -> None:
        Topology(engine).declare_exchange(EXCHANGE, exchange_type)  # refuses an unknown type now
        self.exchange_type = exchange_type
        self.engine = engine
        self.max_tables = max_tables
        self.stats = RouterStats()
        self._built: dict[str, _Built] = {}

    def route(
        self,
        exchange: str,
        table: Sequence[tuple],
        routing_key: str,
        headers: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """The queues a message reaches through ``exchange`` whose bindings are ``table``.

        ``headers`` are the message's headers: all of them count on a headers exchange;
        elsewhere only ``CC`` and ``BCC``, so a header an AMQP table cannot carry (kombu allows
        any serialisable value) still fails only where it would change the route.
        """
        topology = self.topology(exchange, table)
        if headers:
            if self.exchange_type != "headers":
                headers = {name: headers[name] for name in SENDER_SELECTED if name in headers}
            headers = as_sent_by(headers, PY_AMQP)  # as py-amqp would send them to RabbitMQ
        return topology.route(EXCHANGE, routing_key, headers)

    def topology(self, exchange: str, table: Sequence[tuple]) -> Topology:
        """The built topology of ``exchange`` for ``table``: the kept one if its rows are the
        same (in any order), else a new one."""
        rows = table if type(table) is list else list(table)
        built = self._built.get(exchange)
        if built is not None:
            # Row by row first: the memory transport hands over the very same tuples, so this
            # is a pointer comparison; Redis hands over equal text in the same order while the
            # set is unchanged.
            if built.rows == rows:
                self.stats.hits += 1
                return built.topology
            if len(built.rows) == len(rows):
                if built.row_set is None:
                    built.row_set = frozenset(built.rows)
                if built.row_set == frozenset(rows):
                    self.stats.reorders += 1
                    built.rows = list(rows)
                    return built.topology
        topology = self._build(rows)
        self._built.pop(exchange, None)
        if len(self._built) >= self.max_tables:
            del self._built[next(iter(self._built))]
        self._built[exchange] = _Built(list(rows), topology)  # a copy: kombu edits its list
        self.stats.builds += 1
        return topology

    def _build(self, rows: list) -> Topology:
        topology = Topology(self.engine)
        topology.declare_exchange(EXCHANGE, self.exchange_type)
        headers = self.exchange_type == "headers"
        for row in rows:
            routing_key, pattern, queue = row[0], row[1], row[2]
            topology.declare_queue(queue)
            arguments = decode_arguments(pattern) if headers else None
            topology.bind(EXCHANGE, queue, routing_key or "", arguments)
        return topology

    def forget(self, exchange: str | None = None) -> None:
        """Drop the kept topology of ``exchange`` (of every exchange if None)."""
        if exchange is None:
            self._built.clear()
        else:
            self._built.pop(exchange, None)
