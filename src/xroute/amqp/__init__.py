"""An AMQP 0-9-1 broker in memory, for tests: real clients connect, and routing is RabbitMQ's
(`xroute.Topology`'s). See docs/amqp.md."""

from xroute.amqp.broker import Broker, BrokerNotRunning
from xroute.amqp.errors import AMQPError
from xroute.amqp.vhost import Record

__all__ = ["AMQPError", "Broker", "BrokerNotRunning", "Record"]
