"""Mirror a topology into a real broker, publish, and read back what each queue received."""

from __future__ import annotations

from typing import Any

import amqp

from tests.conformance.typed import patched_encoder, plain
from xroute import Topology


class Mirror:
    """Declares the same exchanges, queues and bindings in a `Topology` and in RabbitMQ."""

    def __init__(self, channel, prefix: str, exclusive: bool = True) -> None:
        self.channel = channel
        # Exclusive queues vanish with the connection, but a definitions export leaves them
        # out: reading a topology back through the management API needs ordinary ones.
        self.exclusive = exclusive
        self.prefix = prefix
        self.topology = Topology()
        self.exchanges: list[str] = []
        self.queues: list[str] = []

    def name(self, short: str) -> str:
        return self.prefix + short

    def exchange(self, short: str, kind: str, alternate: str | None = None) -> None:
        args = {"alternate-exchange": self.name(alternate)} if alternate else None
        self.topology.declare_exchange(self.name(short), kind, arguments=args)
        self.channel.exchange_declare(self.name(short), kind, auto_delete=False, arguments=args)
        self.exchanges.append(self.name(short))

    def queue(self, short: str) -> None:
        self.topology.declare_queue(self.name(short))
        self.channel.queue_declare(self.name(short), exclusive=self.exclusive, auto_delete=False)
        self.queues.append(self.name(short))

    def bind(
        self,
        source: str,
        destination: str,
        key: str,
        arguments: dict | None = None,
        to_exchange: bool = False,
    ) -> None:
        # ``arguments`` may hold `Typed` values: the broker gets them, xroute their plain form.
        kind = "exchange" if to_exchange else "queue"
        source, destination = self.name(source), self.name(destination)
        self.topology.bind(source, destination, key, plain(arguments), destination_type=kind)
        with patched_encoder():
            if to_exchange:
                self.channel.exchange_bind(destination, source, key, arguments=arguments or {})
            else:
                self.channel.queue_bind(destination, source, key, arguments=arguments or {})

    def publish_and_compare(self, messages: list[tuple[str, str, dict[str, Any] | None]]) -> int:
        """Publish (exchange, key, headers) messages with confirms; assert that every queue got
        exactly the messages `Topology.route` says. Returns the number of deliveries checked.
        Headers may hold `Typed` values: the broker gets them, xroute their plain form."""
        expected: dict[str, set[str]] = {q: set() for q in self.queues}
        for number, (short, key, headers) in enumerate(messages):
            message_id = str(number)
            for queue in self.topology.route(self.name(short), key, plain(headers)):
                expected[queue].add(message_id)
            message = amqp.Message(b"", message_id=message_id, application_headers=headers or {})
            with patched_encoder():
                self.channel.basic_publish(message, self.name(short), key)
        received = {q: self.drain(q) for q in self.queues}
        for queue in self.queues:
            if received[queue] != expected[queue]:
                diff = []
                for message_id in sorted(received[queue] ^ expected[queue], key=int)[:10]:
                    short, key, headers = messages[int(message_id)]
                    where = "RabbitMQ only" if message_id in received[queue] else "xroute only"
                    diff.append(f"  {where}: exchange {short!r} key {key!r} headers {headers!r}")
                bindings = [b for b in self.topology.bindings() if b.destination.name == queue]
                raise AssertionError(
                    f"queue {queue} differs from RabbitMQ:\n" + "\n".join(diff)
                    + f"\nbindings to it: {bindings}"
                )
        return sum(len(v) for v in expected.values())

    def drain(self, queue: str) -> set[str]:
        got = set()
        while True:
            message = self.channel.basic_get(queue, no_ack=True)
            if message is None:
                return got
            got.add(message.properties["message_id"])

    def cleanup(self) -> None:
        for name in self.exchanges:
            self.channel.exchange_delete(name)
        for name in self.queues:
            self.channel.queue_delete(name)
