"""A private RabbitMQ node with the stream plugin (``rabbitmq_stream``), and publishers for
its streams: with the stream protocol (rstream) and with AMQP 0-9-1 into a stream queue."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import amqp

from xroute.bench.rabbitmq import PrivateNode, _free_port, connect, private_node


@dataclass(frozen=True)
class StreamNode:
    """A node's AMQP URL, its stream port, and the ``rabbitmq-stream://`` URI of a stream."""

    node: PrivateNode
    stream_port: int

    @property
    def amqp_url(self) -> str:
        """The node's AMQP 0-9-1 URL (guest/guest)."""
        return self.node.amqp_url

    @property
    def management_url(self) -> str | None:
        """The management API (``http://127.0.0.1:PORT``), when the node was started with it."""
        url = self.node.management_url
        return url.replace("guest@", "") if url else None

    def restart(self, pause_s: float = 2.0) -> None:
        """Stop the node's RabbitMQ application and start it again (``rabbitmqctl -n NODE
        stop_app`` / ``start_app``: this node only); returns when it is back."""
        import time

        self.node.rabbitmqctl("stop_app")
        try:
            time.sleep(pause_s)
        finally:
            self.node.rabbitmqctl("start_app")

    def uri(self, stream: str) -> str:
        """``rabbitmq-stream://guest@127.0.0.1:PORT/%2F?stream=STREAM`` (password: guest,
        from RABBITMQ_PASSWORD)."""
        return f"rabbitmq-stream://guest@127.0.0.1:{self.stream_port}/%2F?stream={stream}"


@contextlib.contextmanager
def stream_node(management: bool = False) -> Iterator[StreamNode]:
    """Start a private node with the stream plugin on free loopback ports (and the management
    API, on its own free port, if asked); stop it after."""
    port = _free_port()
    config = (
        f"stream.listeners.tcp.1 = 127.0.0.1:{port}\n"
        # The stream protocol tells clients where the stream's leader is: this very address.
        f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {port}\n"
    )
    with private_node(management=management, plugins=("rabbitmq_stream",), config=config) as node:
        yield StreamNode(node, port)


def declare_stream(amqp_url: str, name: str, arguments: dict[str, Any] | None = None) -> None:
    """Declare a stream queue (``x-queue-type: stream``) over AMQP 0-9-1."""
    connection = connect(amqp_url)
    try:
        connection.channel().queue_declare(
            name, durable=True, auto_delete=False,
            arguments={"x-queue-type": "stream", **(arguments or {})},
        )
    finally:
        connection.close()


def publish_091(
    amqp_url: str, exchange: str, messages: list[tuple[str, dict[str, Any] | None, bytes, str]]
) -> None:
    """Publish (routing key, headers, body, message_id) messages to ``exchange`` with confirms.
    Typed header values (`xroute.core.values`) travel in their own types (py-amqp's encoder,
    patched as the conformance tests do)."""
    from tests.conformance.typed import patched_encoder

    connection = connect(amqp_url)
    channel = connection.channel()
    try:
        with patched_encoder():
            for key, headers, body, message_id in messages:
                channel.basic_publish(
                    amqp.Message(body, message_id=message_id, application_headers=headers or {}),
                    exchange, key,
                )
    finally:
        connection.close()


def publish_stream(port: int, stream: str, bodies: list[bytes], batch: int = 500) -> None:
    """Publish ``bodies`` with the stream protocol (rstream's producer, confirmed)."""
    from rstream import AMQPMessage, Producer

    sent = [0]  # confirmed so far, across attempts

    async def go() -> None:
        async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
            for at in range(sent[0], len(bodies), batch):
                await producer.send_batch(
                    stream,
                    [AMQPMessage(body=b, application_properties={"n": at + i})
                     for i, b in enumerate(bodies[at : at + batch])],
                )
                sent[0] = min(at + batch, len(bodies))

    # Retried, from the first batch not confirmed, while the node recovers its streams after
    # a start (StreamNotAvailable).
    import time

    deadline = time.monotonic() + 120
    while True:
        try:
            asyncio.run(go())
            return
        except Exception as error:
            if type(error).__name__ not in ("StreamNotAvailable", "LeaderNotAvailable"):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
