"""Messages published through the wire reach exactly the queues `Topology.route_message` names
for the same declarations: exchanges of every type, exchange-to-exchange bindings, alternate
exchanges, CC/BCC and the default exchange."""

from __future__ import annotations

import pika
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute.amqp import Broker
from xroute.core.topology import Topology

EXCHANGES = ["e0", "e1", "e2"]
QUEUES = ["q0", "q1", "q2", "q3"]
WORDS = st.sampled_from(["a", "b", "*", "#", ""])
binding_keys = st.lists(WORDS, max_size=3).map(".".join)
routing_keys = st.lists(st.sampled_from(["a", "b", "q0", ""]), max_size=3).map(".".join)
header_args = st.fixed_dictionaries(
    {"x-match": st.sampled_from(["all", "any"])},
    optional={"h": st.sampled_from(["a", "b"]), "g": st.sampled_from([1, 2])},
)
topologies = st.fixed_dictionaries(
    {
        "types": st.lists(
            st.sampled_from(["direct", "fanout", "topic", "headers"]), min_size=3, max_size=3
        ),
        "alternate": st.one_of(st.none(), st.sampled_from(EXCHANGES)),
        "bindings": st.lists(
            st.tuples(
                st.sampled_from(EXCHANGES),
                st.sampled_from(QUEUES + EXCHANGES),
                binding_keys,
                header_args,
            ),
            max_size=10,
        ),
        "messages": st.lists(
            st.tuples(
                st.sampled_from(EXCHANGES + [""]),
                routing_keys,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "h": st.sampled_from(["a", "b"]),
                        "g": st.sampled_from([1, 2]),
                        "CC": st.lists(routing_keys, max_size=2),
                        "BCC": st.lists(routing_keys, max_size=2),
                    },
                ),
            ),
            min_size=1,
            max_size=5,
        ),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies)
def test_wire_routing_is_topologys(spec):
    reference = Topology()
    with Broker() as broker:
        connection = pika.BlockingConnection(pika.URLParameters(broker.url))
        channel = connection.channel()
        channel.confirm_delivery()
        for index, (name, kind) in enumerate(zip(EXCHANGES, spec["types"])):
            arguments = {}
            if index == 0 and spec["alternate"] is not None:
                arguments["alternate-exchange"] = spec["alternate"]
            channel.exchange_declare(name, kind, arguments=arguments)
            reference.declare_exchange(name, kind, arguments=arguments)
        for queue in QUEUES:
            channel.queue_declare(queue)
            reference.declare_queue(queue)
        for source, destination, key, arguments in spec["bindings"]:
            kind = "exchange" if destination in EXCHANGES else "queue"
            args = arguments if reference.exchanges[source].type == "headers" else {}
            if kind == "exchange":
                channel.exchange_bind(destination, source, key, arguments=args)
            else:
                channel.queue_bind(destination, source, key, arguments=args)
            reference.bind(source, destination, key, args, kind)
        for exchange, key, headers in spec["messages"]:
            expected = reference.route_message(exchange, key, dict(headers))
            channel.basic_publish(exchange, key, b"m", pika.BasicProperties(headers=headers))
            reached = set()
            for queue in QUEUES:
                method, properties, _ = channel.basic_get(queue, auto_ack=True)
                if method is not None:
                    reached.add(queue)
                    assert "BCC" not in (properties.headers or {})
                    assert channel.basic_get(queue)[0] is None  # one copy per queue
            assert reached == expected, (exchange, key, headers, spec)
        connection.close()
