"""The cases where RabbitMQ's routing was once unlike xroute's (issue 15), as data: each is one
exchange ``X`` and one queue ``q``, one binding and one message.

Measured against RabbitMQ 3.10.8 (Debian 12) on 2026-11-23 with py-amqp, values sent with an
exact AMQP type (`Typed` where py-amqp would pick another). `tests/test_rabbitmq_cases.py` checks
xroute against ``routed``; ``make conformance`` (tests/conformance/test_rabbitmq_cases.py)
checks the broker against ``broker_routed`` too, so a broker that changes is noticed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from xroute.core.values import binary, long, longstr

QUEUE = "$q"  # a routing key or CC key naming the queue itself (its real name differs per run)


@dataclass(frozen=True)
class Typed:
    """A value sent to the broker with AMQP type letter ``code`` (``x`` binary, ``l`` 64-bit,
    ``I`` 32-bit, ``f`` 32-bit float, ``T`` timestamp, ``D`` (scale, unscaled) decimal)."""

    code: str
    value: Any


@dataclass(frozen=True)
class Case:
    """One exchange, one queue bound to it, one message: does the message reach the queue?"""

    name: str
    row: str  # the row of issue 15's table, or the rule it pins
    exchange_type: str
    routed: bool  # xroute's answer (docs/semantics.md)
    binding_key: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    routing_key: str = ""
    headers: dict[str, Any] = field(default_factory=dict)  # as a client decodes them
    exchange_arguments: dict[str, Any] = field(default_factory=dict)
    wire_headers: dict[str, Any] | None = None  # what the broker is sent, if not `headers`
    wire_arguments: dict[str, Any] | None = None
    broker_routed: bool | None = None  # RabbitMQ's answer where xroute differs on purpose

    @property
    def broker(self) -> bool:
        """What RabbitMQ 3.10.8 does."""
        return self.routed if self.broker_routed is None else self.broker_routed


def _ts(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None)


CASES = [
    # Row 1: the default exchange is never an alternate.
    Case("alternate-exchange-empty", "1", "direct", False, binding_key="other",
         routing_key=QUEUE, exchange_arguments={"alternate-exchange": ""}),
    # Row 2: CC elements that are not text are skipped.
    Case("cc-int-beside-text", "2", "direct", True, "b", routing_key="z", headers={"CC": [1, "b"]}),
    Case("cc-void-beside-text", "2", "direct", True, "b", routing_key="z",
         headers={"CC": [None, "b"]}),
    Case("cc-array-beside-text", "2", "direct", True, "b", routing_key="z",
         headers={"CC": [["b"], "b"]}),
    Case("bcc-int-beside-text", "2", "direct", True, "b", routing_key="z",
         headers={"BCC": [7, "b"]}),
    # Row 3: a binary element is not a key.
    Case("cc-binary", "3", "direct", False, "b", routing_key="z", headers={"CC": [b"b"]},
         wire_headers={"CC": [Typed("x", b"b")]}),
    # Row 4: CC keys are longstr, of any length.
    Case("cc-long-key", "4", "topic", True, "b.#", routing_key="z",
         headers={"CC": ["b." + "x" * 300]}),
    Case("cc-long-key-direct", "4", "direct", True, "b" * 255, routing_key="z",
         headers={"CC": ["x" * 300, "b" * 255]}),
    # Row 5: CC keys are bytes; one that is not UTF-8 still routes.
    Case("cc-not-utf8", "5", "topic", True, "a.*", routing_key="z",
         headers={"CC": [longstr(b"a.\xff")]}),
    # Row 6: decimals (Python Decimal) are header values and binding arguments.
    Case("fanout-decimal-header", "6", "fanout", True, headers={"d": Decimal("1.5")}),
    Case("decimal-equal", "6", "headers", True, arguments={"k": Decimal("1.5")},
         headers={"k": Decimal("1.5")}),
    Case("decimal-other-scale", "6", "headers", False, arguments={"k": Decimal("1.5")},
         headers={"k": Decimal("1.50")}),
    Case("decimal-is-not-int", "6", "headers", False, arguments={"k": 1},
         headers={"k": Decimal("1")}),
    Case("decimal-is-not-float", "6", "headers", False, arguments={"k": 1.5},
         headers={"k": Decimal("1.5")}),
    Case("decimal-is-not-text", "6", "headers", False, arguments={"k": "1"},
         headers={"k": Decimal("1")}),
    Case("decimal-in-array", "6", "headers", True, arguments={"k": [Decimal("-2.25")]},
         headers={"k": [Decimal("-2.25")]}),
    # Row 7: timestamps (Python datetime) are header values and binding arguments.
    Case("fanout-timestamp-header", "7", "fanout", True, headers={"t": datetime(2020, 1, 1)}),
    Case("timestamp-equals-int", "7", "headers", True, arguments={"k": 1}, headers={"k": _ts(1)}),
    Case("int-equals-timestamp", "7", "headers", True, arguments={"k": _ts(1)}, headers={"k": 1}),
    Case("timestamp-equals-timestamp", "7", "headers", True, arguments={"k": _ts(86400)},
         headers={"k": _ts(86400)}),
    Case("timestamp-other-second", "7", "headers", False, arguments={"k": _ts(1)},
         headers={"k": _ts(2)}),
    Case("timestamp-in-array-is-not-int", "7", "headers", False, arguments={"k": [1]},
         headers={"k": [_ts(1)]}),
    Case("timestamp-in-array", "7", "headers", True, arguments={"k": [_ts(5)]},
         headers={"k": [_ts(5)]}),
    # Row 8: nested tables compare in field order.
    Case("table-other-order", "8", "headers", False, arguments={"k": {"a": 1, "b": 2}},
         headers={"k": {"b": 2, "a": 1}}),
    Case("table-same-order", "8", "headers", True, arguments={"k": {"a": 1, "b": 2}},
         headers={"k": {"a": 1, "b": 2}}),
    # Row 9: an empty table is an empty array.
    Case("empty-array-binding-empty-table", "9", "headers", True, arguments={"k": []},
         headers={"k": {}}),
    Case("empty-table-binding-empty-array", "9", "headers", True, arguments={"k": {}},
         headers={"k": []}),
    Case("empty-table-in-array-is-not-empty-array", "9", "headers", False, arguments={"k": [[]]},
         headers={"k": [{}]}),
    Case("empty-table-in-table-is-not-empty-array", "9", "headers", False,
         arguments={"k": {"a": []}}, headers={"k": {"a": {}}}),
    # Row 10: widths inside arrays count, as the typed values of xroute.core.values say them (issue 34;
    # before them, plain Python values lost the widths and xroute differed here).
    Case("array-int-widths", "10", "headers", False, arguments={"k": [1]},
         headers={"k": [long(1)]},
         wire_arguments={"k": [Typed("I", 1)]}, wire_headers={"k": [Typed("l", 1)]}),
    Case("array-longstr-binary", "10", "headers", False, arguments={"k": ["v"]},
         headers={"k": [binary(b"v")]}, wire_headers={"k": [Typed("x", b"v")]}),
    # Widths at the top level are compared by value, by both.
    Case("top-int-widths", "10", "headers", True, arguments={"k": 1}, headers={"k": 1},
         wire_arguments={"k": Typed("I", 1)}, wire_headers={"k": Typed("l", 1)}),
    Case("top-longstr-binary", "10", "headers", True, arguments={"k": "v"}, headers={"k": b"v"},
         wire_headers={"k": Typed("x", b"v")}),
]
