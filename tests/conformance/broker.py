"""Mirror a topology into a real broker, publish, and read back what each queue received."""

from __future__ import annotations

from typing import Any

import amqp

from tests.conformance.typed import patched_encoder, plain
from xroute import Topology
from xroute.core.profiles import profile_for_version


def broker_profile(channel) -> str:
    """The version profile of the broker ``channel`` talks to (``"3.10"`` for 3.10.8)."""
    version = channel.connection.server_properties.get("version", "")
    if isinstance(version, bytes):
        version = version.decode()
    return profile_for_version(version)


class Mirror:
    """Declares the same exchanges, queues and bindings in a `Topology` and in RabbitMQ."""

    def __init__(
        self, channel, prefix: str, exclusive: bool = True, rabbitmq: str | None = None
    ) -> None:
        self.channel = channel
        # Exclusive queues vanish with the connection, but a definitions export leaves them
        # out: reading a topology back through the management API needs ordinary ones.
        self.exclusive = exclusive
        self.prefix = prefix
        # The broker's own version profile unless told (3.10.8 compares a timestamp header
        # in seconds and 1 == 1.0 at the top; 4.x does neither).
        self.topology = Topology(rabbitmq=rabbitmq or broker_profile(channel))
        self.exchanges: list[str] = []
        self.queues: list[str] = []

    def name(self, short: str) -> str:
        return self.prefix + short

    def exchange(
        self, short: str, kind: str, alternate: str | None = None, arguments: dict | None = None
    ) -> None:
        args = dict(arguments or {})
        if alternate:
            args["alternate-exchange"] = self.name(alternate)
        args = args or None
        self.topology.declare_exchange(self.name(short), kind, arguments=args)
        self.channel.exchange_declare(self.name(short), kind, auto_delete=False, arguments=args)
        self.exchanges.append(self.name(short))

    def queue(self, short: str, arguments: dict | None = None) -> None:
        self.topology.declare_queue(self.name(short), arguments=arguments)
        self.channel.queue_declare(
            self.name(short), exclusive=self.exclusive, auto_delete=False, arguments=arguments
        )
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

    def unbind(self, source: str, destination: str, key: str, arguments: dict | None = None):
        """Remove a queue binding in both."""
        source, destination = self.name(source), self.name(destination)
        self.topology.unbind(source, destination, key, plain(arguments))
        with patched_encoder():
            self.channel.queue_unbind(destination, source, key, arguments=arguments or {})

    def publish(self, short: str, key: str, headers: dict | None, properties: dict, tag: str):
        """Publish one message, told apart by ``tag`` (its app_id property)."""
        message = amqp.Message(
            b"", app_id=tag, application_headers=headers or {}, **properties
        )
        with patched_encoder():
            self.channel.basic_publish(message, self.name(short) if short else "", key)

    def publish_and_compare(self, messages: list[tuple], random: bool = False) -> int:
        """Publish (exchange, key, headers[, properties]) messages with confirms; assert that
        every queue got exactly the messages `Topology.route` says. Returns the number of
        deliveries checked. Headers may hold `Typed` values: the broker gets them, xroute
        their plain form. With ``random``, a message must land in as many queues as
        `Topology.route` says, each one among `Topology.route_candidates`."""
        expected: dict[str, set[str]] = {q: set() for q in self.queues}
        allowed: dict[str, set[str]] = {q: set() for q in self.queues}
        counts: dict[str, int] = {}
        for number, (short, key, headers, *rest) in enumerate(messages):
            tag = str(number)
            properties = {"message_id": tag, **(rest[0] if rest else {})}
            routed = self.topology.route(
                self.name(short), key, plain(headers), properties=properties
            )
            for queue in routed:
                expected[queue].add(tag)
            if random:
                counts[tag] = len(routed)
                for queue in self.topology.route_candidates(
                    self.name(short), key, plain(headers), properties=properties
                ):
                    allowed[queue].add(tag)
            self.publish(short, key, headers, properties, tag)
        received = {q: self.drain(q) for q in self.queues}
        if random:
            landed: dict[str, int] = {}
            for queue, tags in received.items():
                stray = tags - allowed[queue]
                assert not stray, f"queue {queue} got {sorted(stray)[:5]} outside the candidates"
                for tag in tags:
                    landed[tag] = landed.get(tag, 0) + 1
            assert {t: n for t, n in landed.items() if n} == {t: n for t, n in counts.items() if n}
            return sum(landed.values())
        for queue in self.queues:
            if received[queue] != expected[queue]:
                diff = []
                for message_id in sorted(received[queue] ^ expected[queue], key=int)[:10]:
                    short, key, headers, *_ = messages[int(message_id)]
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
            got.add(message.properties["app_id"])

    def cleanup(self) -> None:
        for name in self.exchanges:
            self.channel.exchange_delete(name)
        for name in self.queues:
            self.channel.queue_delete(name)
