"""An AMQP 0-9-1 broker in memory, for tests: real clients connect, and routing is RabbitMQ's
(`xroute.Topology`'s). See docs/amqp.md."""

from xroute.extras import require

# Without pamqp (the amqp extra), say which pip install brings it, as xroute.kombu does,
# rather than a bare ModuleNotFoundError from deep inside.
require("pamqp", what="xroute.amqp (the in-memory AMQP broker, xroute serve)")

from xroute.amqp.broker import Broker, BrokerNotRunning  # noqa: E402
from xroute.amqp.errors import AMQPError  # noqa: E402
from xroute.amqp.vhost import Record  # noqa: E402

__all__ = ["AMQPError", "Broker", "BrokerNotRunning", "Record"]
