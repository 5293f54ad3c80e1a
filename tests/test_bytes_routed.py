"""Bytes a binding once every bound key has been routed (issue 36 goal 6, tenth session):
`xroute.bench.contact.traced_bytes_per_binding_routed`. A topology's build figure alone would
let a design move a route's answer out of the build and make it on the key's first route,
where a user who publishes to every key they bound gets the memory back; this figure counts
it. tracemalloc is deterministic: the same on every machine and load."""

from __future__ import annotations

from xroute.bench.contact import (
    literal_binding_keys,
    traced_bytes_per_binding,
    traced_bytes_per_binding_routed,
)
from xroute.bench.shapes import Shape, literal, mqtt


def test_literal_binding_keys_are_the_distinct_keys_without_wildcard_words_in_order():
    shape = Shape("s", "", [("a.b", "q1"), ("a.*", "q1"), ("c", "q2"), ("a.b", "q2"),
                            ("#", "q3"), ("x.#y.z*", "q3")], [], [])
    assert literal_binding_keys(shape) == ["a.b", "c", "x.#y.z*"]


def test_routing_every_key_of_a_queue_a_key_keeps_no_answer_a_key():
    # Each key its own queue (literal 100k, NATS): the routes add the route cache's entry a
    # key (Python 3.11: about 35 bytes), not a frozenset (216) a key or queue. Making the
    # one-queue answer on first routes instead of at bind drops the build figure by 216 and
    # fails here (tried, tenth session: 251).
    shape = literal(3_000, 10)
    built = traced_bytes_per_binding(shape)
    routed = traced_bytes_per_binding_routed(shape)
    assert 0 < routed - built < 64


def test_routing_every_key_of_an_mqtt_site_keeps_no_answer_a_key():
    # An MQTT client's six topics share its queue's answer (`QueueTable.singleton`); the
    # routes add their cache entries and the unions of literal and '#' answers the route
    # cache keeps (Python 3.11: about 48 bytes a binding).
    shape = mqtt(3_000, 10)
    built = traced_bytes_per_binding(shape)
    assert 0 < traced_bytes_per_binding_routed(shape) - built < 100
